/*
 * Pulsar's stored JSON documents through Pulsar's own classes and the serde its metadata cache
 * uses (JSONMetadataSerdeSimpleType / JSONMetadataSerdeTypeRef over ObjectMapperFactory's mapper).
 *
 *   pulsar-json read KIND FILE   FILE: a JSON array of base64 documents. Each is deserialised as
 *                                KIND and serialised back; stdout is a JSON array with, per
 *                                document, {"bytes": base64} or {"error": "Class: message"}.
 *   pulsar-json new KIND         stdout: {"new": base64, "built": base64}, the serialisation of
 *                                a default-constructed value and of `builder().build()` (null
 *                                when the class has no builder).
 *
 * KIND is the document, as Pulsar's resources type it: policies (Policies), local-policies
 * (LocalPolicies), cluster (ClusterData), failure-domain (FailureDomainImpl), tenant
 * (TenantInfo), isolation (Map<String, NamespaceIsolationDataImpl>), bookies
 * (BookiesRackConfiguration).
 */
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JavaType;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.type.TypeFactory;
import java.io.File;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.pulsar.common.policies.data.BookiesRackConfiguration;
import org.apache.pulsar.common.policies.data.ClusterData;
import org.apache.pulsar.common.policies.data.ClusterDataImpl;
import org.apache.pulsar.common.policies.data.FailureDomainImpl;
import org.apache.pulsar.common.policies.data.LocalPolicies;
import org.apache.pulsar.common.policies.data.NamespaceIsolationDataImpl;
import org.apache.pulsar.common.policies.data.Policies;
import org.apache.pulsar.common.policies.data.TenantInfo;
import org.apache.pulsar.common.policies.data.TenantInfoImpl;
import org.apache.pulsar.metadata.api.MetadataSerde;
import org.apache.pulsar.metadata.cache.impl.JSONMetadataSerdeSimpleType;
import org.apache.pulsar.metadata.cache.impl.JSONMetadataSerdeTypeRef;

final class PulsarJson {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Base64.Encoder ENCODE = Base64.getEncoder();
    private static final Base64.Decoder DECODE = Base64.getDecoder();

    private PulsarJson() {
    }

    static int run(String[] args) throws Exception {
        String mode = args[0];
        String kind = args[1];
        MetadataSerde<Object> serde = serde(kind);
        if (mode.equals("new")) {
            Map<String, Object> answer = new LinkedHashMap<>();
            answer.put("new", encode(serde.serialize(kind, fresh(kind))));
            Object built = built(kind);
            answer.put("built", built == null ? null : encode(serde.serialize(kind, built)));
            System.out.print(JSON.writeValueAsString(answer));
            return 0;
        }
        if (!mode.equals("read")) {
            System.err.println("unknown mode " + mode);
            return 2;
        }
        String[] documents = JSON.readValue(new File(args[2]), String[].class);
        List<Map<String, String>> answers = new ArrayList<>();
        for (String document : documents) {
            Map<String, String> answer = new LinkedHashMap<>();
            try {
                Object value = serde.deserialize(kind, DECODE.decode(document), null);
                answer.put("bytes", encode(serde.serialize(kind, value)));
            } catch (Exception e) {
                String message = String.valueOf(e.getMessage());
                int end = message.indexOf('\n');
                answer.put("error", e.getClass().getName() + ": "
                        + (end < 0 ? message : message.substring(0, end)));
            }
            answers.add(answer);
        }
        System.out.print(JSON.writeValueAsString(answers));
        return 0;
    }

    private static String encode(byte[] bytes) {
        return ENCODE.encodeToString(bytes);
    }

    @SuppressWarnings("unchecked")
    private static MetadataSerde<Object> serde(String kind) {
        if (kind.equals("isolation")) {
            // NamespaceResources.IsolationPolicyResources' type reference
            return (MetadataSerde<Object>) (MetadataSerde<?>) new JSONMetadataSerdeTypeRef<>(
                    new TypeReference<Map<String, NamespaceIsolationDataImpl>>() { });
        }
        JavaType type = TypeFactory.defaultInstance().constructSimpleType(classOf(kind), new JavaType[0]);
        return new JSONMetadataSerdeSimpleType<>(type);
    }

    private static Class<?> classOf(String kind) {
        return switch (kind) {
            case "policies" -> Policies.class;
            case "local-policies" -> LocalPolicies.class;
            case "cluster" -> ClusterData.class;
            case "failure-domain" -> FailureDomainImpl.class;
            case "tenant" -> TenantInfo.class;
            case "bookies" -> BookiesRackConfiguration.class;
            default -> throw new IllegalArgumentException("unknown kind " + kind);
        };
    }

    private static Object fresh(String kind) {
        return switch (kind) {
            case "policies" -> new Policies();
            case "local-policies" -> new LocalPolicies();
            case "cluster" -> new ClusterDataImpl();
            case "failure-domain" -> new FailureDomainImpl();
            case "tenant" -> new TenantInfoImpl();
            case "isolation" -> Map.of("p", new NamespaceIsolationDataImpl());
            case "bookies" -> new BookiesRackConfiguration();
            default -> throw new IllegalArgumentException("unknown kind " + kind);
        };
    }

    private static Object built(String kind) throws Exception {
        Class<?> impl = switch (kind) {
            case "cluster" -> ClusterDataImpl.class;
            case "failure-domain" -> FailureDomainImpl.class;
            case "tenant" -> TenantInfoImpl.class;
            case "isolation" -> NamespaceIsolationDataImpl.class;
            default -> null;
        };
        if (impl == null) {
            return null;
        }
        Object builder = impl.getMethod("builder").invoke(null);
        Method build = builder.getClass().getMethod("build");
        build.setAccessible(true);
        Object value = build.invoke(builder);
        return kind.equals("isolation") ? Map.of("p", value) : value;
    }
}
