import type { LiveLookup } from './live'
import type { RouterOptions } from './router'

/** Mounts the live router on an OverlayExpress instance (after configureEngine, before start) and attaches its Engine. */
export declare function mountOnOverlayExpress<T extends { app: unknown; engine?: unknown }> (server: T, live: LiveLookup, routerOptions: RouterOptions): Promise<T>
