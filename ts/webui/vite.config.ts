// Builds the web UI into ../../expmgr/webui (committed; served by the manager at `/`).
// The build must be reproducible: CI rebuilds and compares with the committed files,
// so nothing here may depend on the time or the absolute path of the checkout.
import { defineConfig } from 'vitest/config';

// `npm run dev` proxies the API to a running experiment: EXPMGR_URL=http://127.0.0.1:8080
declare const process: { env: Record<string, string | undefined> };
const target = process.env.EXPMGR_URL ?? 'http://127.0.0.1:8080';

export default defineConfig({
  base: './',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: '../../expmgr/webui',
    emptyOutDir: true,
    target: 'es2020',
    sourcemap: false,
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 1024,
  },
  server: {
    proxy: {
      '/api': {
        target,
        ws: true,
        changeOrigin: true,
        // the server takes websockets from its own origin only
        configure: (proxy) => proxy.on('proxyReqWs', (proxyReq) => proxyReq.setHeader('origin', target)),
      },
    },
  },
  test: {
    include: ['test/**/*.test.{ts,tsx}'],
    environment: 'node',
  },
});
