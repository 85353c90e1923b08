package settee.dcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import com.couchbase.client.dcp.StreamFrom;
import com.couchbase.client.dcp.StreamTo;
import org.junit.jupiter.api.Test;

/**
 * A collection-aware dcp-client (keys with collection ids, the collections manifest, system
 * events, NOOPs required) streams a settee bucket from seqno 0: it sees the scope and
 * collection created through the management REST API, and the default collection's
 * documents exactly as `_changes` lists them, including ones written while it streams.
 */
class CollectionAwareStreamTest {
    @Test
    void seesCollectionEventsAndTheDefaultCollection() throws Exception {
        try (Settee settee = Settee.start()) {
            settee.request("PUT", "/db", null);
            for (int n = 0; n < 50; n++) {
                settee.request("PUT", "/db/doc" + n, "{\"n\":" + n + "}");
            }
            settee.manage("/pools/default/buckets/db/scopes", "name=shop");
            settee.manage("/pools/default/buckets/db/scopes/shop/collections", "name=items");

            Consumer consumer = new Consumer(settee, true);
            try {
                consumer.client.connect().block(Consumer.WAIT);
                consumer.client.initializeState(StreamFrom.BEGINNING, StreamTo.INFINITY).block(Consumer.WAIT);
                consumer.client.startStreaming().block(Consumer.WAIT);
                Map<String, Boolean> listed = Consumer.changes(settee, null);
                consumer.waitFor("stream from 0", () -> consumer.changes.equals(listed));
                // Every vbucket has its own event for each manifest change.
                int vbuckets = consumer.client.numPartitions();
                consumer.waitFor("system events", () -> consumer.events.size() == 2 * vbuckets);
                assertEquals(vbuckets, consumer.events.stream().filter("scope shop"::equals).count());
                assertEquals(vbuckets, consumer.events.stream().filter("collection items"::equals).count());

                // Live: written after the streams reached the end of their backfill.
                for (int n = 50; n < 60; n++) {
                    settee.request("PUT", "/db/doc" + n, "{\"n\":" + n + "}");
                }
                Map<String, Boolean> now = Consumer.changes(settee, null);
                consumer.waitFor("live changes", () -> consumer.changes.equals(now));
                assertEquals(60, new TreeMap<>(consumer.changes).size());
                assertTrue(consumer.problems.isEmpty(), consumer.problems.toString());
                assertTrue(List.copyOf(consumer.events).stream().allMatch(e -> e.startsWith("scope") || e.startsWith("collection")));
            } finally {
                consumer.client.disconnect().block(Consumer.WAIT);
            }
        }
    }
}
