# One image for both roles: `node services/api/src/main.ts --role api` and `node services/worker/src/main.ts`
# (and the example run task server, `node examples/run-task-server/server.ts`). Node 24 runs the TypeScript
# sources directly (type stripping), so there is no build step.
#
#   docker build -t runtasks .                 # the runtime image (default target)
#   docker build --target test -t runtasks:test .   # the integration suite with its dev dependencies
FROM node:24-bookworm-slim AS base
WORKDIR /app
ENV NPM_CONFIG_UPDATE_NOTIFIER=false NPM_CONFIG_FUND=false NPM_CONFIG_AUDIT=false

# The workspace manifests only, so dependency layers are rebuilt only when they change.
FROM base AS manifests
COPY package.json package-lock.json ./
COPY shared/package.json shared/
COPY services/api/package.json services/api/
COPY services/worker/package.json services/worker/
COPY cli/package.json cli/

FROM manifests AS deps
RUN npm ci --omit=dev

FROM manifests AS dev-deps
RUN npm ci

# The sources without tests: the runtime image carries only what runs.
FROM base AS source
COPY shared ./shared
COPY services ./services
COPY examples ./examples
# The CLI's sources: the API bundles them into the one file it serves at /cli/runtasks.mjs.
COPY cli/package.json ./cli/package.json
COPY cli/src ./cli/src
RUN find shared services examples -name '*.test.ts' -delete && rm -rf shared/test services/*/test

# The integration suite (`docker compose --profile test run --rm tests`). Like CI it needs PostgreSQL 15 and
# Redis binaries (the crash tests start their own throwaway servers), openssl (signature checks) and
# Chromium (the dashboard's browser test). It runs as root because the crash tests start PostgreSQL as
# the postgres user (runuser); the runtime image below does not.
FROM base AS test
RUN mkdir -p /etc/postgresql-common/createcluster.d \
  && echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/no-main-cluster.conf \
  && apt-get update \
  && apt-get install -y --no-install-recommends ca-certificates openssl postgresql-15 redis-server chromium \
  && rm -rf /var/lib/apt/lists/*
COPY --from=dev-deps /app/node_modules ./node_modules
COPY . .
ENV NODE_ENV=test CI=true
CMD ["npm", "test"]

FROM base AS runtime
ENV NODE_ENV=production HOST=0.0.0.0 PORT=3000
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY --from=source /app/shared ./shared
COPY --from=source /app/services ./services
COPY --from=source /app/examples ./examples
COPY --from=source /app/cli ./cli
USER node
EXPOSE 3000
# No curl in slim images: ask Node. Liveness of the API; compose gives the worker its own check (WORKER_HEALTH_PORT).
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=5 CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/healthz').then(r=>process.exit(r.ok?0:1)).catch(()=>process.exit(1))"]
# Exec form, so SIGTERM reaches node (not npm) and shutdown is graceful.
CMD ["node", "services/api/src/main.ts", "--role", "api"]
