package settee.dcp;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Base64;
import java.util.Comparator;
import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/** A real `settee serve` on loopback ports, started for a test and stopped by close(). */
final class Settee implements AutoCloseable {
    static final String USER = "admin";
    static final String PASSWORD = "secret";
    private static final ObjectMapper JSON = new ObjectMapper();

    final Process process;
    final Path dataDir;
    final String httpAddr;
    final String kvAddr;
    final String mgmtAddr;
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

    private Settee(Process process, Path dataDir, String httpAddr, String kvAddr, String mgmtAddr) {
        this.process = process;
        this.dataDir = dataDir;
        this.httpAddr = httpAddr;
        this.kvAddr = kvAddr;
        this.mgmtAddr = mgmtAddr;
    }

    static Settee start() throws IOException {
        String binary = System.getenv("SETTEE_BIN");
        if (binary == null || binary.isEmpty()) {
            throw new IllegalStateException("SETTEE_BIN must name the settee binary");
        }
        Path dataDir = Files.createTempDirectory("settee-compat-dcp");
        Process process = new ProcessBuilder(binary, "serve",
                "--http-addr", "127.0.0.1:0", "--kv-addr", "127.0.0.1:0", "--mgmt-addr", "127.0.0.1:0",
                "--admin", USER + ":" + PASSWORD, "--data-dir", dataDir.toString())
                .redirectError(ProcessBuilder.Redirect.INHERIT)
                .start();
        BufferedReader lines = new BufferedReader(
                new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        String httpAddr = null;
        String kvAddr = null;
        String mgmtAddr = null;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (kvAddr == null) {
            if (System.nanoTime() > deadline) {
                process.destroyForcibly();
                throw new IllegalStateException("settee did not start");
            }
            String line = lines.readLine();
            if (line == null) {
                throw new IllegalStateException("settee exited before listening");
            }
            int http = line.indexOf("listening on http://");
            if (http >= 0) {
                httpAddr = line.substring(http + "listening on http://".length()).split("\\s+")[0];
            }
            int kv = line.indexOf("couchbase kv on ");
            if (kv >= 0) {
                kvAddr = line.substring(kv + "couchbase kv on ".length()).split("\\s+")[0];
                int mgmt = line.indexOf("management on http://");
                if (mgmt >= 0) {
                    mgmtAddr = line.substring(mgmt + "management on http://".length()).split("\\s+")[0];
                }
            }
        }
        // Keep draining stdout so the server never blocks on a full pipe.
        Thread drain = new Thread(() -> {
            try {
                while (lines.readLine() != null) {
                    // discard
                }
            } catch (IOException ignored) {
                // the process is gone
            }
        });
        drain.setDaemon(true);
        drain.start();
        return new Settee(process, dataDir, httpAddr, kvAddr, mgmtAddr);
    }

    /** An HTTP request to the CouchDB door as the admin; the response body parsed as JSON. */
    JsonNode request(String method, String path, String body) throws IOException, InterruptedException {
        return send(httpAddr, method, path, "application/json", body);
    }

    /** A form POST to the management port (Couchbase's scopes and collections REST API). */
    JsonNode manage(String path, String form) throws IOException, InterruptedException {
        return send(mgmtAddr, "POST", path, "application/x-www-form-urlencoded", form);
    }

    private JsonNode send(String addr, String method, String path, String type, String body)
            throws IOException, InterruptedException {
        String credentials = Base64.getEncoder()
                .encodeToString((USER + ":" + PASSWORD).getBytes(StandardCharsets.UTF_8));
        HttpRequest request = HttpRequest.newBuilder(URI.create("http://" + addr + path))
                .header("Authorization", "Basic " + credentials)
                .header("Content-Type", type)
                .timeout(Duration.ofSeconds(30))
                .method(method, body == null
                        ? HttpRequest.BodyPublishers.noBody()
                        : HttpRequest.BodyPublishers.ofString(body))
                .build();
        HttpResponse<String> response = http.send(request, HttpResponse.BodyHandlers.ofString());
        if (response.statusCode() >= 300) {
            throw new IOException(method + " " + path + ": " + response.statusCode() + " " + response.body());
        }
        return JSON.readTree(response.body());
    }

    @Override
    public void close() throws Exception {
        process.destroy();
        if (!process.waitFor(10, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor();
        }
        try (var paths = Files.walk(dataDir)) {
            paths.sorted(Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
        }
    }
}
