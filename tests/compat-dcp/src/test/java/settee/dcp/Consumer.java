package settee.dcp;

import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Supplier;

import com.couchbase.client.dcp.Client;
import com.couchbase.client.dcp.highlevel.CollectionCreated;
import com.couchbase.client.dcp.highlevel.DatabaseChangeListener;
import com.couchbase.client.dcp.highlevel.Deletion;
import com.couchbase.client.dcp.highlevel.FlowControlMode;
import com.couchbase.client.dcp.highlevel.Mutation;
import com.couchbase.client.dcp.highlevel.ScopeCreated;
import com.couchbase.client.dcp.highlevel.StreamFailure;
import com.fasterxml.jackson.databind.JsonNode;

/** A dcp-client of a settee bucket and what it saw: per document id, deleted or not. */
final class Consumer implements DatabaseChangeListener {
    static final Duration WAIT = Duration.ofSeconds(Long.getLong("dcp.wait.seconds", 60));

    final Map<String, Boolean> changes = new ConcurrentHashMap<>();
    final Map<Integer, Long> lastSeqno = new ConcurrentHashMap<>();
    final List<String> events = new CopyOnWriteArrayList<>();
    final ConcurrentLinkedQueue<String> problems = new ConcurrentLinkedQueue<>();
    final Client client;

    Consumer(Settee settee, boolean collectionsAware) {
        client = Client.builder()
                .seedNodes(settee.kvAddr)
                .credentials(Settee.USER, Settee.PASSWORD)
                .bucket("db")
                .collectionsAware(collectionsAware)
                .flowControl(64 * 1024)
                .build();
        client.listener(this, FlowControlMode.AUTOMATIC);
    }

    private void saw(int vbucket, long seqno, String key, boolean deleted) {
        Long before = lastSeqno.put(vbucket, seqno);
        if (before != null && before >= seqno) {
            problems.add("vbucket " + vbucket + " went from seqno " + before + " to " + seqno);
        }
        changes.put(key, deleted);
    }

    @Override
    public void onMutation(Mutation mutation) {
        saw(mutation.getVbucket(), mutation.getOffset().getSeqno(), mutation.getKey(), false);
    }

    @Override
    public void onDeletion(Deletion deletion) {
        saw(deletion.getVbucket(), deletion.getOffset().getSeqno(), deletion.getKey(), true);
    }

    @Override
    public void onScopeCreated(ScopeCreated created) {
        events.add("scope " + created.getScopeName());
    }

    @Override
    public void onCollectionCreated(CollectionCreated created) {
        events.add("collection " + created.getCollectionName());
    }

    @Override
    public void onFailure(StreamFailure failure) {
        problems.add("stream failure on vbucket " + failure.getVbucket() + ": " + failure.getCause());
    }

    /** Waits until `done`, failing on a problem or after WAIT. */
    void waitFor(String what, Supplier<Boolean> done) throws InterruptedException {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (!done.get()) {
            if (!problems.isEmpty()) {
                fail(what + ": " + problems);
            }
            if (System.nanoTime() > deadline) {
                fail(what + ": timed out; saw " + new TreeMap<>(changes) + " and " + events);
            }
            Thread.sleep(50);
        }
    }

    /** `_changes` of the bucket (after `since`, if given): id -> deleted. */
    static Map<String, Boolean> changes(Settee settee, String since) throws Exception {
        JsonNode feed = settee.request("GET", "/db/_changes" + (since == null ? "" : "?since=" + since), null);
        Map<String, Boolean> listed = new TreeMap<>();
        for (JsonNode row : feed.get("results")) {
            listed.put(row.get("id").asText(), row.path("deleted").asBoolean(false));
        }
        return listed;
    }
}
