package livestate.engines;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The livestate binary under test: its CLI ({@code init}, {@code read --json}, {@code sql},
 * {@code compact}, {@code expire}, {@code export flink-sql}, ...) and a running {@code serve}.
 *
 * <p>The binary is {@code $LIVESTATE_BIN}, else the debug build scripts/check makes
 * ({@code $CARGO_TARGET_DIR/debug/livestate}, {@code CARGO_TARGET_DIR} defaulting to
 * {@code $HOME/.cache/livestate/target}).
 */
public final class Livestate {
    public static final ObjectMapper JSON = new ObjectMapper();

    private Livestate() {}

    /** The binary every test runs. */
    public static Path binary() {
        String explicit = System.getenv("LIVESTATE_BIN");
        Path bin;
        if (explicit != null && !explicit.isEmpty()) {
            bin = Path.of(explicit);
        } else {
            String target = System.getenv("CARGO_TARGET_DIR");
            if (target == null || target.isEmpty()) {
                target = System.getProperty("user.home") + "/.cache/livestate/target";
            }
            bin = Path.of(target, "debug", "livestate");
        }
        if (!Files.isExecutable(bin)) {
            throw new IllegalStateException(
                    "no livestate binary at " + bin + ": build it (cargo build -p livestate-cli) or set LIVESTATE_BIN");
        }
        return bin;
    }

    /** The example company's spec directory in this clone (tests/engines is two levels down). */
    public static Path exampleSpec() {
        Path p = Path.of("..", "..", "examples", "company").toAbsolutePath().normalize();
        if (!Files.isDirectory(p)) {
            throw new IllegalStateException("no example spec at " + p);
        }
        return p;
    }

    /** Runs {@code livestate args...}, returns its standard output; fails naming stderr on a non-zero exit. */
    public static String run(String... args) {
        return run(Duration.ofMinutes(5), args);
    }

    public static String run(Duration timeout, String... args) {
        List<String> cmd = new ArrayList<>();
        cmd.add(binary().toString());
        cmd.addAll(List.of(args));
        try {
            Path err = Files.createTempFile("livestate-stderr", ".txt");
            Path out = Files.createTempFile("livestate-stdout", ".txt");
            try {
                Process p = new ProcessBuilder(cmd)
                        .redirectOutput(out.toFile())
                        .redirectError(err.toFile())
                        .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
                        .start();
                if (!p.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
                    p.destroyForcibly();
                    throw new IllegalStateException("timed out after " + timeout + ": " + String.join(" ", cmd));
                }
                String stdout = Files.readString(out);
                if (p.exitValue() != 0) {
                    throw new IllegalStateException("exit " + p.exitValue() + ": " + String.join(" ", cmd)
                            + "\n" + Files.readString(err) + "\n" + stdout);
                }
                return stdout;
            } finally {
                Files.deleteIfExists(err);
                Files.deleteIfExists(out);
            }
        } catch (IOException e) {
            throw new IllegalStateException("running " + cmd, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted running " + cmd, e);
        }
    }

    /** {@code livestate read --json}: the receipt and rows of {@code table} at {@code at} (latest, a snapshot or a tag). */
    public static JsonNode read(Path dir, String table, At at) {
        List<String> args = new ArrayList<>(List.of("read", "--dir", dir.toString(), table, "--json"));
        args.addAll(at.cliArgs());
        return parse(run(args.toArray(String[]::new)));
    }

    /** {@code livestate sql --json}. */
    public static JsonNode sql(Path dir, String query) {
        return parse(run("sql", "--dir", dir.toString(), "--json", "--limit", "1000000", query));
    }

    public static JsonNode parse(String json) {
        try {
            return JSON.readTree(json);
        } catch (IOException e) {
            throw new IllegalStateException("not JSON: " + json, e);
        }
    }

    /** Which version of a table to read. */
    public record At(Long snapshot, String tag) {
        public static final At LATEST = new At(null, null);

        public static At snapshot(long id) {
            return new At(id, null);
        }

        public static At tag(String name) {
            return new At(null, name);
        }

        List<String> cliArgs() {
            if (snapshot != null) return List.of("--snapshot", snapshot.toString());
            if (tag != null) return List.of("--tag", tag);
            return List.of();
        }

        @Override
        public String toString() {
            return snapshot != null ? "snapshot " + snapshot : tag != null ? "tag " + tag : "latest";
        }
    }

    public static int freePort() {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** A running {@code livestate serve} and a client for its HTTP API (docs/api.md). */
    public static final class Server implements AutoCloseable {
        public final Path dir;
        public final String base;
        private final Process process;
        private final Path log;
        private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

        private Server(Path dir, String base, Process process, Path log) {
            this.dir = dir;
            this.base = base;
            this.process = process;
            this.log = log;
        }

        /** Starts {@code livestate serve --dir dir} on a free loopback port and waits for its health check. */
        public static Server start(Path dir) {
            int port = freePort();
            Path log = dir.resolveSibling(dir.getFileName() + "-serve.log");
            try {
                Process p = new ProcessBuilder(binary().toString(), "serve", "--dir", dir.toString(),
                        "--listen", "127.0.0.1:" + port)
                        .redirectErrorStream(true)
                        .redirectOutput(log.toFile())
                        .start();
                Server s = new Server(dir, "http://127.0.0.1:" + port, p, log);
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (System.nanoTime() < deadline) {
                    if (!p.isAlive()) {
                        throw new IllegalStateException("livestate serve exited: " + Files.readString(log));
                    }
                    try {
                        if (s.get("/v1/health", null).path("status").asText().equals("ok")) return s;
                    } catch (IllegalStateException e) {
                        Thread.sleep(200);
                    }
                }
                p.destroyForcibly();
                throw new IllegalStateException("livestate serve did not answer within 60 s: " + Files.readString(log));
            } catch (IOException e) {
                throw new IllegalStateException(e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(e);
            }
        }

        public JsonNode get(String path, String token) {
            return send(HttpRequest.newBuilder(URI.create(base + path)).GET(), token, 200);
        }

        public JsonNode post(String path, String token, String body, int expected) {
            return send(HttpRequest.newBuilder(URI.create(base + path))
                    .POST(HttpRequest.BodyPublishers.ofString(body, StandardCharsets.UTF_8)), token, expected);
        }

        private JsonNode send(HttpRequest.Builder b, String token, int expected) {
            if (token != null) b.header("Authorization", "Bearer " + token);
            b.timeout(Duration.ofSeconds(120));
            try {
                HttpResponse<String> r = http.send(b.build(), HttpResponse.BodyHandlers.ofString());
                if (r.statusCode() != expected) {
                    throw new IllegalStateException(r.request().method() + " " + r.uri() + ": " + r.statusCode()
                            + " (expected " + expected + ") " + r.body());
                }
                return r.body().isEmpty() ? JSON.nullNode() : parse(r.body());
            } catch (IOException e) {
                throw new IllegalStateException(b.build().uri() + ": " + e, e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(e);
            }
        }

        /** Appends JSON-lines events as {@code token}'s module; returns each line's record offset. */
        public List<Long> emit(String token, List<String> lines) {
            JsonNode r = post("/v1/events", token, String.join("\n", lines) + "\n", 200);
            List<Long> offsets = new ArrayList<>();
            r.path("appended").forEach(a -> offsets.add(a.path("offset").asLong()));
            return offsets;
        }

        /**
         * A consistent read of {@code tables} (POST /v1/reads): livestate derives everything recorded
         * so far and commits each named table through it, so the tables' snapshots are on disk after.
         */
        public JsonNode commit(String token, String... tables) {
            StringBuilder body = new StringBuilder("{\"tables\":[");
            for (int i = 0; i < tables.length; i++) {
                if (i > 0) body.append(',');
                body.append("{\"table\":\"").append(tables[i]).append("\",\"limit\":1}");
            }
            body.append("]}");
            return post("/v1/reads", token, body.toString(), 200);
        }

        public String log() {
            try {
                return Files.readString(log);
            } catch (IOException e) {
                return "(no log: " + e + ")";
            }
        }

        /** Stops the server with SIGTERM (it commits every table on the way out) and waits. */
        @Override
        public void close() {
            process.destroy();
            try {
                if (!process.waitFor(60, TimeUnit.SECONDS)) {
                    process.destroyForcibly();
                    process.waitFor(10, TimeUnit.SECONDS);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** {@code livestate token add}: the token printed for {@code principal}. */
    public static String tokenAdd(Path dir, String principal, String... scopes) {
        List<String> args = new ArrayList<>(List.of("token", "add", "--dir", dir.toString(), principal));
        for (String s : scopes) {
            args.add("--scope");
            args.add(s);
        }
        String out = run(args.toArray(String[]::new)).trim();
        String[] lines = out.split("\n");
        return lines[lines.length - 1].trim();
    }
}
