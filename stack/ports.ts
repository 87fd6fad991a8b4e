/** The stack's, tests' and benches' ports come from the one allocator in core/platform/ports.ts (the worker's metrics exporter uses it too). */
export { freePort, stablePort } from '../core/platform/ports.js';
