/*
 * One JVM for many invocations of an upstream program's main entry point.
 *
 * Each line on standard input is a JSON array: the program's name, then its arguments. The runner
 * runs the program in-process with System.out and System.err pointed at buffers, and answers with
 * one JSON line {"exit": code, "stdout": "...", "stderr": "..."} on its own standard output.
 *
 * Programs:
 *   pulsar-admin CONF ARGS...      org.apache.pulsar.admin.cli.PulsarAdminTool, as its main runs it
 *   bookkeeper-shell CONF ARGS...  org.apache.bookkeeper.bookie.BookieShell, as its main runs it
 *   bk-client ARGS...              BookKeeper's client API (BkClientCommands)
 *   pulsar-produce URL TOPIC COUNT Pulsar's Java client producing to a broker (PulsarProduce)
 *   pulsar-json MODE KIND ...      Pulsar's stored documents through its own classes (PulsarJson)
 */
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.FileInputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.bookkeeper.bookie.BookieShell;
import org.apache.bookkeeper.util.EntryFormatter;
import org.apache.bookkeeper.util.LedgerIdFormatter;
import org.apache.bookkeeper.common.conf.ConfigurationUtil;
import org.apache.commons.configuration2.CompositeConfiguration;

public final class InteropRunner {
    private static final ObjectMapper JSON = new ObjectMapper();

    private InteropRunner() {
    }

    public static void main(String[] argv) throws Exception {
        PrintStream out = System.out;
        PrintStream err = System.err;
        BkClientCommands client = new BkClientCommands();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        out.println("{\"ready\": true}");
        out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            List<String> request = Arrays.asList(JSON.readValue(line, String[].class));
            ByteArrayOutputStream stdout = new ByteArrayOutputStream();
            ByteArrayOutputStream stderr = new ByteArrayOutputStream();
            PrintStream captureOut = new PrintStream(stdout, true, StandardCharsets.UTF_8);
            PrintStream captureErr = new PrintStream(stderr, true, StandardCharsets.UTF_8);
            System.setOut(captureOut);
            System.setErr(captureErr);
            int exit;
            try {
                String program = request.get(0);
                String[] args = request.subList(1, request.size()).toArray(new String[0]);
                switch (program) {
                    case "pulsar-admin" -> exit = pulsarAdmin(args);
                    case "bookkeeper-shell" -> exit = bookieShell(args);
                    case "bk-client" -> exit = client.run(args);
                    case "pulsar-produce" -> exit = PulsarProduce.run(args);
                    case "pulsar-json" -> exit = PulsarJson.run(args);
                    default -> {
                        captureErr.println("unknown program " + program);
                        exit = 127;
                    }
                }
            } catch (Throwable e) {
                e.printStackTrace(captureErr);
                exit = 255;
            } finally {
                captureOut.flush();
                captureErr.flush();
                System.setOut(out);
                System.setErr(err);
            }
            Map<String, Object> answer = new LinkedHashMap<>();
            answer.put("exit", exit);
            answer.put("stdout", stdout.toString(StandardCharsets.UTF_8));
            answer.put("stderr", stderr.toString(StandardCharsets.UTF_8));
            out.println(JSON.writeValueAsString(answer));
            out.flush();
        }
        client.close();
        out.flush();
        Runtime.getRuntime().halt(0);
    }

    /** PulsarAdminTool.execute without its exit: the configuration file, then the command line. */
    private static int pulsarAdmin(String[] args) throws Exception {
        Properties properties = new Properties();
        try (FileInputStream conf = new FileInputStream(args[0])) {
            properties.load(conf);
        }
        Class<?> toolClass = Class.forName("org.apache.pulsar.admin.cli.PulsarAdminTool");
        Object tool = toolClass.getConstructor(Properties.class).newInstance(properties);
        Method run = toolClass.getDeclaredMethod("run", String[].class);
        run.setAccessible(true);
        try {
            boolean ok = (Boolean) run.invoke(tool, (Object) Arrays.copyOfRange(args, 1, args.length));
            return ok ? 0 : 1;
        } finally {
            // The tool's PulsarAdmin (an HTTP client with its own threads), if one was made.
            Object supplier = toolClass.getMethod("getPulsarAdminSupplier").invoke(tool);
            Field admin = supplier.getClass().getDeclaredField("admin");
            admin.setAccessible(true);
            Object made = admin.get(supplier);
            if (made instanceof AutoCloseable closeable) {
                closeable.close();
            }
        }
    }

    /** BookieShell.main without its exit: `-conf FILE` handling, default formatters, run. */
    private static int bookieShell(String[] args) throws Exception {
        BookieShell shell = new BookieShell(null, null);
        CompositeConfiguration conf = new CompositeConfiguration();
        conf.addConfiguration(ConfigurationUtil.newConfiguration(c -> c.propertiesBuilder(new File(args[0]))));
        shell.setConf(conf);
        Field bkConf = BookieShell.class.getDeclaredField("bkConf");
        bkConf.setAccessible(true);
        org.apache.bookkeeper.conf.ServerConfiguration server =
                (org.apache.bookkeeper.conf.ServerConfiguration) bkConf.get(shell);
        setField(shell, "ledgerIdFormatter", LedgerIdFormatter.newLedgerIdFormatter(server));
        setField(shell, "entryFormatter", EntryFormatter.newEntryFormatter(server));
        return shell.run(Arrays.copyOfRange(args, 1, args.length));
    }

    private static void setField(Object target, String name, Object value) throws Exception {
        Field field = target.getClass().getDeclaredField(name);
        field.setAccessible(true);
        field.set(target, value);
    }
}
