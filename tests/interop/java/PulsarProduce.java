/*
 * Pulsar's Java client (pulsar-client-original 4.0.8): `pulsar-produce SERVICE_URL TOPIC COUNT`
 * sends COUNT messages "message-<i>" with one producer and prints "produced <COUNT>".
 */
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;

final class PulsarProduce {
    private PulsarProduce() {
    }

    static int run(String[] args) throws Exception {
        int count = Integer.parseInt(args[2]);
        try (PulsarClient client = PulsarClient.builder().serviceUrl(args[0])
                .operationTimeout(60, TimeUnit.SECONDS).build();
             Producer<byte[]> producer = client.newProducer().topic(args[1])
                     .enableBatching(false).create()) {
            for (int i = 0; i < count; i++) {
                producer.send(("message-" + i).getBytes(StandardCharsets.UTF_8));
            }
        }
        System.out.println("produced " + count);
        return 0;
    }
}
