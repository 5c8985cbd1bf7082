package org.elasticsearch.node;

import org.elasticsearch.common.settings.Settings;
import org.elasticsearch.env.Environment;
import org.elasticsearch.plugins.ClasspathPluginsService;
import org.elasticsearch.plugins.Plugin;
import org.elasticsearch.plugins.PluginsLoader;
import org.elasticsearch.plugins.PluginsService;

import java.util.Collections;
import java.util.List;

/**
 * A Node whose plugins come from the classpath (see ClasspathPluginsService). Lives in this
 * package because NodeConstruction.prepareConstruction and NodeServiceProvider are package-private.
 */
public class ClasspathNode extends Node {
    public ClasspathNode(Settings settings, List<Class<? extends Plugin>> plugins) {
        super(NodeConstruction.prepareConstruction(
            new Environment(settings, null),
            PluginsLoader.createPluginsLoader(Collections.emptySet(), Collections.emptySet(), Collections.emptyMap(), false),
            new NodeServiceProvider() {
                @Override
                PluginsService newPluginService(Environment environment, PluginsLoader pluginsLoader) {
                    return new ClasspathPluginsService(environment.settings(), plugins);
                }
            },
            true));
    }
}
