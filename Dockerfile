# syntax=docker/dockerfile:1
# berth-operator: the TypeScript sources compiled to JavaScript (scripts/build.ts; types erased, nothing
# down-levelled) on the Node.js version the project pins (package-lock.json, devDependency "node";
# test/unit/deploy-image.test.ts keeps them equal), with only the production dependencies installed.
# Running JavaScript rather than the sources spares Node's type stripper (~18 MiB) in every pod.
#
#   docker build -t berth-operator:0.1.0 .
#   docker run --rm berth-operator:0.1.0 run --help

FROM node:24.21.0-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# Production dependencies only, exactly as locked; no lifecycle scripts.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

FROM node:24.21.0-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# The compiler is a dev dependency; nothing of this stage but its output reaches the image.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/build.ts ./scripts/build.ts
COPY src ./src
COPY webhooks ./webhooks
COPY certs ./certs
RUN node scripts/build.ts --out-dir /app/build

FROM node:24.21.0-bookworm-slim
# The operator never needs a package manager at run time.
RUN rm -rf /usr/local/lib/node_modules /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack \
      /usr/local/bin/yarn /usr/local/bin/yarnpkg /opt/yarn-*
ENV NODE_ENV=production
# A young generation of at most 3 x 4 MiB instead of V8's 3 x 16 MiB: much less RSS, the same CPU for a
# review decided without a read (docs/performance.md). The install's Deployment repeats this and adds an
# old-generation limit from the container's memory limit.
ENV NODE_OPTIONS="--max-semi-space-size=4"
# Two malloc arenas instead of glibc's 8 per core: ~10 MiB less RSS for the operator at 1,000 leases, no
# measurable cost in its time to hold them (docs/performance.md, "leases").
ENV MALLOC_ARENA_MAX=2
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY --from=build /app/build ./
# Non-root (the "nonroot" uid of distroless); the Deployment also runs it with a read-only root filesystem.
USER 65532:65532
EXPOSE 9443 8080 8081
ENTRYPOINT ["node", "src/main.js"]
CMD ["run"]
