/*
 * BookKeeper's own client (org.apache.bookkeeper.client.api) on a metadata service URI, one
 * command per call; output is one line per fact, for the tests to compare.
 *
 *   write URI v2|v3 E QW QA COUNT       create a ledger (CRC32C, empty password, as Pulsar's
 *                                       managed ledgers), add COUNT entries "entry-<i>", close;
 *                                       prints "ledger <id>"
 *   read URI v2|v3 LEDGER               open without recovery, read 0..LAC; prints
 *                                       "lac <n>", "closed <bool>", "entry <i> <text>"
 *   recover URI v2|v3 LEDGER            open with recovery (fences the ledger), read all; prints
 *                                       as read
 *   ensembles URI LEDGER                prints "ensemble <first entry> <bookie>,<bookie>,..."
 */
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SortedMap;
import org.apache.bookkeeper.client.api.BookKeeper;
import org.apache.bookkeeper.client.api.DigestType;
import org.apache.bookkeeper.client.api.LedgerEntries;
import org.apache.bookkeeper.client.api.LedgerEntry;
import org.apache.bookkeeper.client.api.ReadHandle;
import org.apache.bookkeeper.client.api.WriteHandle;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.apache.bookkeeper.net.BookieId;

final class BkClientCommands implements AutoCloseable {
    private static final byte[] PASSWORD = new byte[0];
    private final Map<String, BookKeeper> clients = new HashMap<>();

    int run(String[] args) throws Exception {
        switch (args[0]) {
            case "write" -> {
                BookKeeper bk = client(args[1], args[2]);
                try (WriteHandle handle = bk.newCreateLedgerOp()
                        .withEnsembleSize(Integer.parseInt(args[3]))
                        .withWriteQuorumSize(Integer.parseInt(args[4]))
                        .withAckQuorumSize(Integer.parseInt(args[5]))
                        .withDigestType(DigestType.CRC32C)
                        .withPassword(PASSWORD)
                        .execute().get()) {
                    int count = Integer.parseInt(args[6]);
                    for (int i = 0; i < count; i++) {
                        handle.append(("entry-" + i).getBytes(StandardCharsets.UTF_8));
                    }
                    System.out.println("ledger " + handle.getId());
                }
                return 0;
            }
            case "read", "recover" -> {
                BookKeeper bk = client(args[1], args[2]);
                try (ReadHandle handle = bk.newOpenLedgerOp()
                        .withLedgerId(Long.parseLong(args[3]))
                        .withDigestType(DigestType.CRC32C)
                        .withPassword(PASSWORD)
                        .withRecovery(args[0].equals("recover"))
                        .execute().get()) {
                    long lac = handle.getLastAddConfirmed();
                    System.out.println("lac " + lac);
                    System.out.println("closed " + handle.getLedgerMetadata().isClosed());
                    if (lac >= 0) {
                        try (LedgerEntries entries = handle.read(0, lac)) {
                            for (LedgerEntry entry : entries) {
                                System.out.println("entry " + entry.getEntryId() + " "
                                        + new String(entry.getEntryBytes(), StandardCharsets.UTF_8));
                            }
                        }
                    }
                }
                return 0;
            }
            case "ensembles" -> {
                BookKeeper bk = client(args[1], "v2");
                try (ReadHandle handle = bk.newOpenLedgerOp()
                        .withLedgerId(Long.parseLong(args[2]))
                        .withDigestType(DigestType.CRC32C)
                        .withPassword(PASSWORD)
                        .withRecovery(false)
                        .execute().get()) {
                    SortedMap<Long, ? extends List<BookieId>> ensembles =
                            handle.getLedgerMetadata().getAllEnsembles();
                    for (Map.Entry<Long, ? extends List<BookieId>> e : ensembles.entrySet()) {
                        StringBuilder ids = new StringBuilder();
                        for (BookieId id : e.getValue()) {
                            ids.append(ids.length() == 0 ? "" : ",").append(id);
                        }
                        System.out.println("ensemble " + e.getKey() + " " + ids);
                    }
                }
                return 0;
            }
            default -> {
                System.err.println("unknown command " + args[0]);
                return 2;
            }
        }
    }

    private BookKeeper client(String uri, String protocol) throws Exception {
        String key = uri + " " + protocol;
        BookKeeper bk = clients.get(key);
        if (bk == null) {
            ClientConfiguration conf = new ClientConfiguration();
            conf.setMetadataServiceUri(uri);
            conf.setUseV2WireProtocol(protocol.equals("v2"));
            conf.setAddEntryTimeout(10);
            conf.setReadEntryTimeout(10);
            bk = BookKeeper.newBuilder(conf).build();
            clients.put(key, bk);
        }
        return bk;
    }

    @Override
    public void close() throws Exception {
        for (BookKeeper bk : clients.values()) {
            bk.close();
        }
    }
}
