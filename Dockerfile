# One image for every role: the api (default command), the worker, the agent backend, the migrate and provision
# jobs — docker-compose.yml picks the role with the command. Production runs compiled JavaScript (npm run build:
# tsc + the prebuilt workflow bundle) as the non-root `node` user; docs/deploying.md.
# The image's Node major is the one package.json pins for development and CI (devDependency `node`, engines).
# Both base images are build arguments: where no image registry is reachable, deploy/containers/run.ts builds
# stand-ins from Debian's packages and the npm registry's `node` (docs/deploying.md "Containers built and run here").
ARG NODE_IMAGE=node:24-bookworm-slim
ARG GO_IMAGE=golang:1.26-bookworm

# --- shellctl: the Landlock helper the agent's shell commands run under (Go, sandbox/) -------------------------
FROM ${GO_IMAGE} AS shellctl
WORKDIR /src/sandbox
COPY sandbox/go.mod sandbox/go.sum ./
RUN go mod download
COPY sandbox/ ./
RUN CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -o /out/shellctl ./shellctl

# --- build: all dependencies (prisma and typescript are dev dependencies), generated client, compiled JS --------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# NODE_ENV stays unset here: `npm ci` must install the dev dependencies the build needs. No install scripts, as
# npm 11 does by default: nothing here needs one, and some would try to download binaries. So the `node`
# devDependency stays without its binary (its preinstall fetches it) and the image's own Node runs the build.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY . .
# prebuild runs `prisma generate` (offline, scripts/prisma-generate.ts); build type-checks, compiles into dist/
# and bundles the workflows (scripts/build.ts).
RUN npm run build
# The dify-agent CLI bundle the agent's sandbox runs (.cache/sandbox/bin), made now so the runtime needs no build.
RUN node --import tsx --input-type=module -e "const { ensureCliBundle } = await import('./sandbox/build.ts'); await ensureCliBundle();"
# Production dependencies only, for the runtime stage.
RUN npm prune --omit=dev --ignore-scripts --no-audit --no-fund

# --- runtime: compiled JS, production dependencies, non-root -----------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    DATA_DIR=/data \
    WORKSPACES_DIR=/data/workspaces \
    SHELLCTL_PATH=/usr/local/bin/shellctl \
    API_HOST=0.0.0.0 \
    AGENT_BACKEND_HOST=0.0.0.0
WORKDIR /app
COPY --from=build /app/package.json /app/package-lock.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# Read at run time from the project root (core/platform/project-root.ts): the chat page, the migrations, the CLI source
# whose hash tells the sandbox bundle is current.
COPY --from=build /app/web ./web
COPY --from=build /app/prisma/migrations ./prisma/migrations
COPY --from=build /app/cli/dify-agent.ts ./cli/dify-agent.ts
COPY --from=build --chown=node:node /app/.cache/sandbox ./.cache/sandbox
COPY --from=shellctl /out/shellctl /usr/local/bin/shellctl
# DATA_DIR: uploads, agent workspaces, the shellctl token file. A named volume mounted here starts with this
# directory's owner, so the non-root user can write it (docker-compose.yml shares it between the services).
RUN mkdir -p /data/workspaces && chown -R node:node /data
USER node
VOLUME ["/data"]
EXPOSE 5001 5002
# Liveness of whichever role runs: HEALTHCHECK_URL names its endpoint (compose sets it for the worker and the
# agent backend); default the api's. `node` because the slim image has no curl.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch(process.env.HEALTHCHECK_URL || 'http://127.0.0.1:5001/healthz', { signal: AbortSignal.timeout(4000) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "dist/api/main.js"]
