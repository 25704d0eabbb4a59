'use strict'
// Mounting on an Overlay Express server. OverlayExpress exposes its Express `app`
// and adds its own body parsers and routes in start(); mounting our router first
// keeps the raw request bytes for the lookup routes (docs/operators.md).

/**
 * @param {object} server an OverlayExpress instance, after configureEngine() and before start()
 * @param {import('./live').LiveLookup} live
 * @param {object} routerOptions see js/router.d.ts
 */
async function mountOnOverlayExpress (server, live, routerOptions) {
  if (!server || !server.app || typeof server.app.use !== 'function') {
    throw new TypeError('mountOnOverlayExpress needs an OverlayExpress instance (its app is used)')
  }
  server.app.use(live.router(routerOptions))
  if (server.engine) await live.attach(server.engine)
  return server
}

module.exports = { mountOnOverlayExpress }
