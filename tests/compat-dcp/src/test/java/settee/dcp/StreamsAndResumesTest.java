package settee.dcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.TreeMap;

import com.couchbase.client.dcp.StreamFrom;
import com.couchbase.client.dcp.StreamTo;
import com.couchbase.client.dcp.state.StateFormat;
import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;

/**
 * Couchbase's Java dcp-client streams a settee bucket from seqno 0 and sees exactly what
 * `_changes` lists; it saves its session state, and after more writes resumes from that
 * state and sees only the new changes.
 */
class StreamsAndResumesTest {
    private static final java.time.Duration WAIT = Consumer.WAIT;

    @Test
    void streamsFromZeroThenResumesFromSavedState() throws Exception {
        try (Settee settee = Settee.start()) {
            settee.request("PUT", "/db", null);
            Map<String, String> revs = new TreeMap<>();
            for (int n = 0; n < 200; n++) {
                JsonNode saved = settee.request("PUT", "/db/doc" + n, "{\"n\":" + n + "}");
                revs.put("doc" + n, saved.get("rev").asText());
            }
            for (int n = 0; n < 200; n += 9) {
                settee.request("DELETE", "/db/doc" + n + "?rev=" + revs.get("doc" + n), null);
            }
            Map<String, Boolean> listed = Consumer.changes(settee, null);
            String since = settee.request("GET", "/db", null).get("update_seq").asText();

            Consumer first = new Consumer(settee, false);
            byte[] state;
            try {
                first.client.connect().block(WAIT);
                first.client.initializeState(StreamFrom.BEGINNING, StreamTo.INFINITY).block(WAIT);
                first.client.startStreaming().block(WAIT);
                first.waitFor("stream from 0", () -> first.changes.equals(listed));
                // Nothing beyond what `_changes` lists arrives.
                Thread.sleep(500);
                assertEquals(listed, new TreeMap<>(first.changes));
                assertTrue(first.problems.isEmpty(), first.problems.toString());
                state = first.client.sessionState().export(StateFormat.JSON);
            } finally {
                first.client.disconnect().block(WAIT);
            }

            for (int n = 200; n < 230; n++) {
                settee.request("PUT", "/db/doc" + n, "{\"n\":" + n + "}");
            }
            settee.request("PUT", "/db/doc1?rev=" + revs.get("doc1"), "{\"n\":1,\"again\":true}");
            settee.request("DELETE", "/db/doc2?rev=" + revs.get("doc2"), null);
            Map<String, Boolean> newer = Consumer.changes(settee, since);
            assertEquals(32, newer.size(), newer.toString());

            Consumer resumed = new Consumer(settee, false);
            try {
                resumed.client.connect().block(WAIT);
                resumed.client.recoverState(StateFormat.JSON, state).block(WAIT);
                resumed.client.startStreaming().block(WAIT);
                resumed.waitFor("resume from saved state",
                        () -> resumed.changes.keySet().containsAll(newer.keySet()));
                Thread.sleep(1000);
                // Only the changes made after the saved state: none of the 200 seen before.
                assertEquals(newer, new TreeMap<>(resumed.changes));
                assertTrue(resumed.problems.isEmpty(), resumed.problems.toString());
            } finally {
                resumed.client.disconnect().block(WAIT);
            }
        }
    }
}
