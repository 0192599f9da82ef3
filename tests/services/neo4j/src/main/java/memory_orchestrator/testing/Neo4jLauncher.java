package memory_orchestrator.testing;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Stream;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;

/**
 * Starts an embedded Neo4j 5.26 with Bolt on 127.0.0.1:PORT, authentication off, data in a temporary
 * directory, and prints "NEO4J READY bolt://127.0.0.1:PORT" once it accepts work. It stops (and deletes
 * its data) when stdin closes or on SIGTERM, so a test session that dies never leaves it running.
 *
 * <p>Usage: java -Xmx1g -cp ... memory_orchestrator.testing.Neo4jLauncher PORT [DATA_DIR]
 */
public final class Neo4jLauncher {
  private Neo4jLauncher() {}

  public static void main(String[] args) throws Exception {
    if (args.length < 1) {
      System.err.println("usage: Neo4jLauncher PORT [DATA_DIR]");
      System.exit(2);
    }
    int port = Integer.parseInt(args[0]);
    boolean ownsDir = args.length < 2;
    Path home = ownsDir ? Files.createTempDirectory("neo4j-test-") : Path.of(args[1]);
    long started = System.nanoTime();
    DatabaseManagementService dbms =
        new DatabaseManagementServiceBuilder(home)
            .setConfig(BoltConnector.enabled, true)
            .setConfig(BoltConnector.listen_address, new SocketAddress("127.0.0.1", port))
            .setConfig(BoltConnector.advertised_address, new SocketAddress("127.0.0.1", port))
            .setConfig(GraphDatabaseSettings.auth_enabled, false)
            .setConfig(GraphDatabaseSettings.pagecache_memory, 256L * 1024 * 1024)
            .build();
    dbms.database(GraphDatabaseSettings.DEFAULT_DATABASE_NAME).executeTransactionally("RETURN 1");

    CountDownLatch stop = new CountDownLatch(1);
    AtomicBoolean stopped = new AtomicBoolean(false);
    Runnable shutdown =
        () -> {
          if (stopped.compareAndSet(false, true)) {
            dbms.shutdown();
            if (ownsDir) {
              deleteQuietly(home);
            }
            System.out.println("NEO4J STOPPED");
            System.out.flush();
          }
          stop.countDown();
        };
    Runtime.getRuntime().addShutdownHook(new Thread(shutdown, "neo4j-shutdown"));
    long millis = (System.nanoTime() - started) / 1_000_000;
    System.out.println("NEO4J READY bolt://127.0.0.1:" + port + " in " + millis + " ms");
    System.out.flush();

    // The parent holds our stdin open; end-of-file means it went away (cleanly or not).
    Thread watcher =
        new Thread(
            () -> {
              try (InputStream in = System.in) {
                while (in.read() != -1) {
                  // Input is ignored: only its end matters.
                }
              } catch (IOException ignored) {
                // A broken pipe is the same signal as end-of-file.
              }
              shutdown.run();
            },
            "stdin-watcher");
    watcher.setDaemon(true);
    watcher.start();
    stop.await();
    System.exit(0);
  }

  private static void deleteQuietly(Path root) {
    try (Stream<Path> paths = Files.walk(root)) {
      paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException ignored) {
      // Best effort: the temp dir is the OS's to clean otherwise.
    }
  }
}
