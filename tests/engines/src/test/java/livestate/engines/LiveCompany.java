package livestate.engines;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** A fresh directory of the example company with {@code livestate serve} running and a token per module. */
public final class LiveCompany implements AutoCloseable {
    public final Path dir;
    public final Livestate.Server server;
    public final String agent;
    public final String person;
    private final Map<String, String> modules = new HashMap<>();
    private long lastOffset = -1;

    private LiveCompany(Path dir, Livestate.Server server, String agent, String person, Map<String, String> modules) {
        this.dir = dir;
        this.server = server;
        this.agent = agent;
        this.person = person;
        this.modules.putAll(modules);
    }

    /** {@code livestate init} of {@code spec} into {@code target/<name>}, tokens, then {@code serve}. */
    public static LiveCompany start(String name, Path spec) {
        Path dir = Path.of("target", name).toAbsolutePath();
        try {
            Company.deleteTree(dir);
            java.nio.file.Files.deleteIfExists(dir.resolveSibling(name + "-serve.log"));
        } catch (java.io.IOException e) {
            throw new IllegalStateException(e);
        }
        Livestate.run("init", "--dir", dir.toString(), "--spec", spec.toString());
        Map<String, String> modules = new HashMap<>();
        for (String m : List.of("inventory", "commerce", "procurement", "operations")) {
            modules.put(m, Livestate.tokenAdd(dir, "module:" + m));
        }
        String agent = Livestate.tokenAdd(dir, "agent:engines");
        String person = Livestate.tokenAdd(dir, "person:checker", "*");
        return new LiveCompany(dir, Livestate.Server.start(dir), agent, person, modules);
    }

    /** Emits the events {@code e} holds, module by module; returns the last offset. */
    public long emit(Events e) {
        for (Map.Entry<String, List<String>> m : e.take().entrySet()) {
            List<Long> offsets = server.emit(modules.get(m.getKey()), m.getValue());
            lastOffset = Math.max(lastOffset, offsets.get(offsets.size() - 1));
        }
        return lastOffset;
    }

    /** Commits {@code tables} through everything emitted so far (a consistent read). */
    public void commit(String... tables) {
        server.commit(agent, tables);
    }

    public Path warehouse() {
        return dir.resolve("warehouse");
    }

    @Override
    public void close() {
        server.close();
    }
}
