# syntax=docker/dockerfile:1
# berth-operator: Node.js 24 runs the TypeScript sources directly (type stripping), so there is no build
# step — only the production dependencies are installed. The Node.js version is the one the project pins
# (package-lock.json, devDependency "node"); test/unit/deploy-image.test.ts keeps them equal.
#
#   docker build -t berth-operator:0.1.0 .
#   docker run --rm berth-operator:0.1.0 run --help

FROM node:24.21.0-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# Production dependencies only, exactly as locked; no lifecycle scripts.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

FROM node:24.21.0-bookworm-slim
# The operator never needs a package manager at run time.
RUN rm -rf /usr/local/lib/node_modules /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack \
      /usr/local/bin/yarn /usr/local/bin/yarnpkg /opt/yarn-*
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY src ./src
COPY webhooks ./webhooks
COPY certs ./certs
COPY deploy/crds ./deploy/crds
# Non-root (the "nonroot" uid of distroless); the Deployment also runs it with a read-only root filesystem.
USER 65532:65532
EXPOSE 9443 8080 8081
ENTRYPOINT ["node", "src/main.ts"]
CMD ["run"]
