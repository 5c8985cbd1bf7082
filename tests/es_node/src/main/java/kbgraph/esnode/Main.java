package kbgraph.esnode;

import org.elasticsearch.common.logging.LogConfigurator;
import org.elasticsearch.common.settings.Settings;
import org.elasticsearch.node.ClasspathNode;
import org.elasticsearch.node.Node;
import org.elasticsearch.transport.netty4.Netty4Plugin;

import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * One single-node Elasticsearch cluster for kbgraph's tests, bound to 127.0.0.1.
 *
 * Usage: Main HOME_DIR HTTP_PORT [SETTING=VALUE ...]. Without settings it is a single-node cluster;
 * es-node.sh passes node.name, transport.port, discovery.seed_hosts and cluster.initial_master_nodes
 * to make one node of a cluster (discovery.type single-node is then left out). Runs until the JVM
 * is asked to stop (SIGTERM), then closes the node so Lucene releases its files; data under
 * HOME_DIR/data outlives the process, so a node started again on the same HOME_DIR rejoins. The only plugin is the HTTP/transport module (Netty4Plugin);
 * everything kbgraph uses (dense_vector, kNN, BM25 on whitespace tokens, PIT, terms aggregations)
 * is in the server jar.
 */
public final class Main {
    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: Main HOME_DIR HTTP_PORT [SETTING=VALUE ...]");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        Settings.Builder builder = Settings.builder()
            .put("node.name", "kbgraph-test")
            .put("cluster.name", "kbgraph-test")
            .put("path.home", home.toString())
            .put("path.data", home.resolve("data").toString())
            .put("path.logs", home.resolve("logs").toString())
            .put("network.host", "127.0.0.1")
            .put("http.port", args[1])
            .put("transport.port", "0")
            .put("discovery.type", "single-node")
            // a nearly full disk on a developer's machine must not turn the test indexes read-only
            .put("cluster.routing.allocation.disk.threshold_enabled", false)
            .put("action.auto_create_index", true);
        for (int i = 2; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq <= 0) {
                System.err.println("not a SETTING=VALUE pair: " + args[i]);
                System.exit(2);
            }
            String key = args[i].substring(0, eq);
            String value = args[i].substring(eq + 1);
            if (key.equals("discovery.seed_hosts") || key.equals("cluster.initial_master_nodes")) {
                builder.putList(key, value.split(","));
                builder.remove("discovery.type");
            } else {
                builder.put(key, value);
            }
        }
        Settings settings = builder.build();
        // console logging (es-node.sh sends it to a file): the node's code needs a configured
        // logger factory, which the elasticsearch launcher would otherwise set up
        LogConfigurator.configureESLogging();
        LogConfigurator.configureWithoutConfig(settings);
        Node node = new ClasspathNode(settings, List.of(Netty4Plugin.class, RootInfoPlugin.class));
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                node.close();
                node.awaitClose(20, TimeUnit.SECONDS);
            } catch (Exception e) {
                e.printStackTrace();
            } finally {
                stopped.countDown();
            }
        }, "kbgraph-es-node-shutdown"));
        node.start();
        System.out.println("kbgraph-es-node: " + settings.get("node.name") + " started on http://127.0.0.1:" + args[1]);
        stopped.await();
    }
}
