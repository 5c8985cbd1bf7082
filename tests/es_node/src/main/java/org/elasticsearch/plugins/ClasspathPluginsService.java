package org.elasticsearch.plugins;

import org.elasticsearch.Build;
import org.elasticsearch.common.settings.Settings;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * A PluginsService whose plugins are classes already on the JVM classpath, instead of bundles
 * unpacked under path.home/modules and path.home/plugins (which a node assembled from Maven
 * Central artifacts does not have). Lives in this package for the package-private LoadedPlugin
 * record and loadPlugin helper.
 */
public class ClasspathPluginsService extends PluginsService {
    private final List<LoadedPlugin> classpathPlugins;

    public ClasspathPluginsService(Settings settings, List<Class<? extends Plugin>> pluginClasses) {
        super(settings, null, emptyLoader());
        List<LoadedPlugin> loaded = new ArrayList<>(pluginClasses.size());
        ClassLoader loader = ClasspathPluginsService.class.getClassLoader();
        for (Class<? extends Plugin> pluginClass : pluginClasses) {
            PluginDescriptor descriptor = new PluginDescriptor(
                pluginClass.getName(), "loaded from the classpath", Build.current().version(), Build.current().version(),
                "17", pluginClass.getName(), null, List.of(), false, false, false, false);
            loaded.add(new LoadedPlugin(descriptor, loadPlugin(pluginClass, settings, null), loader));
        }
        this.classpathPlugins = Collections.unmodifiableList(loaded);
    }

    private static PluginsLoader emptyLoader() {
        return PluginsLoader.createPluginsLoader(Collections.emptySet(), Collections.emptySet(), Collections.emptyMap(), false);
    }

    @Override
    protected List<LoadedPlugin> plugins() {
        return classpathPlugins;
    }
}
