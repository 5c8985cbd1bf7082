// The graph view's third-party libraries in one browser module (built by `npm run build`).
export { default as Graph } from "graphology";
export { default as Sigma } from "sigma";
export { default as forceAtlas2 } from "graphology-layout-forceatlas2";
export { default as FA2Layout } from "graphology-layout-forceatlas2/worker";
export { circular, random } from "graphology-layout";
