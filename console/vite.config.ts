// The console's build: one script, one style sheet and the page, under fixed names, written
// where troupe-server embeds them (crates/troupe-server/console-dist). The page is served at
// `/` and the files under `/console/`.
import { defineConfig } from "vite";

export default defineConfig({
  base: "/console/",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: "../crates/troupe-server/console-dist",
    emptyOutDir: true,
    assetsDir: "",
    modulePreload: false,
    cssCodeSplit: false,
    sourcemap: false,
    target: "es2022",
    rollupOptions: {
      output: {
        entryFileNames: "console.js",
        chunkFileNames: "console-[name].js",
        assetFileNames: (asset) => (asset.names?.some((n) => n.endsWith(".css")) ? "console.css" : "[name][extname]"),
      },
    },
  },
});
