package kbgraph.esnode;

import org.elasticsearch.Build;
import org.elasticsearch.client.internal.node.NodeClient;
import org.elasticsearch.cluster.metadata.IndexNameExpressionResolver;
import org.elasticsearch.cluster.node.DiscoveryNodes;
import org.elasticsearch.cluster.service.ClusterService;
import org.elasticsearch.common.io.stream.NamedWriteableRegistry;
import org.elasticsearch.common.settings.ClusterSettings;
import org.elasticsearch.common.settings.IndexScopedSettings;
import org.elasticsearch.common.settings.Settings;
import org.elasticsearch.common.settings.SettingsFilter;
import org.elasticsearch.features.NodeFeature;
import org.elasticsearch.plugins.ActionPlugin;
import org.elasticsearch.plugins.Plugin;
import org.elasticsearch.rest.BaseRestHandler;
import org.elasticsearch.rest.RestController;
import org.elasticsearch.rest.RestHandler;
import org.elasticsearch.rest.RestRequest;
import org.elasticsearch.rest.RestResponse;
import org.elasticsearch.rest.RestStatus;
import org.elasticsearch.xcontent.XContentBuilder;

import java.util.Collection;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Predicate;
import java.util.function.Supplier;

/**
 * GET / (and HEAD /): the node's name, cluster and version, as a packaged Elasticsearch answers.
 * In 8.x that endpoint lives in the rest-root module, which Elastic does not publish to Maven
 * Central, so the test node answers it with this plugin of ours.
 */
public final class RootInfoPlugin extends Plugin implements ActionPlugin {
    private final AtomicReference<ClusterService> clusterService = new AtomicReference<>();

    @Override
    public Collection<?> createComponents(PluginServices services) {
        clusterService.set(services.clusterService());
        return List.of();
    }

    @Override
    public Collection<RestHandler> getRestHandlers(Settings settings, NamedWriteableRegistry namedWriteableRegistry,
                                                   RestController restController, ClusterSettings clusterSettings,
                                                   IndexScopedSettings indexScopedSettings, SettingsFilter settingsFilter,
                                                   IndexNameExpressionResolver indexNameExpressionResolver,
                                                   Supplier<DiscoveryNodes> nodesInCluster,
                                                   Predicate<NodeFeature> clusterSupportsFeature) {
        return List.of(new RootHandler(clusterService));
    }

    private static final class RootHandler extends BaseRestHandler {
        private final AtomicReference<ClusterService> clusterService;

        RootHandler(AtomicReference<ClusterService> clusterService) {
            this.clusterService = clusterService;
        }

        @Override
        public String getName() {
            return "kbgraph_root_info";
        }

        @Override
        public List<Route> routes() {
            return List.of(new Route(RestRequest.Method.GET, "/"), new Route(RestRequest.Method.HEAD, "/"));
        }

        @Override
        protected RestChannelConsumer prepareRequest(RestRequest request, NodeClient client) {
            ClusterService cluster = clusterService.get();
            Build build = Build.current();
            return channel -> {
                XContentBuilder body = channel.newBuilder();
                body.startObject()
                    .field("name", cluster.localNode().getName())
                    .field("cluster_name", cluster.getClusterName().value())
                    .field("cluster_uuid", cluster.state().metadata().clusterUUID())
                    .startObject("version")
                    .field("number", build.qualifiedVersion())
                    .field("build_flavor", build.flavor())
                    .field("build_type", build.type().displayName())
                    .field("build_hash", build.hash())
                    .field("build_date", build.date())
                    .field("build_snapshot", build.isSnapshot())
                    .field("lucene_version", org.apache.lucene.util.Version.LATEST.toString())
                    .field("minimum_wire_compatibility_version", build.minWireCompatVersion())
                    .field("minimum_index_compatibility_version", build.minIndexCompatVersion())
                    .endObject()
                    .field("tagline", "You Know, for Search")
                    .endObject();
                channel.sendResponse(new RestResponse(RestStatus.OK, body));
            };
        }
    }
}
