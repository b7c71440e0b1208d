# One image for every Switchyard component: the control plane
# (node dist/control-plane/src/main.js), the router (node dist/data-plane/router/src/main.js) and
# the sidecar agent (node dist/data-plane/agent/src/main.js). Pods set `command: ["node"]` and
# the main module first in `args` (chart and sidecar template; proto/product-image.ts). The
# test environment builds the same image without Docker from this file's COPY lines and config
# (test/env/images), and a unit test checks the two agree. Node 24 is the newest LTS line the
# code is tested on (package.json engines: Node 20, 22, 24). Pin the base by digest in release
# builds.
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
# Dependencies first so source edits do not invalidate the npm ci layer.
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY lib ./lib
COPY proto ./proto
COPY control-plane ./control-plane
COPY data-plane ./data-plane
COPY cli ./cli
# `build` compiles to dist/ (proto/gen is committed); then drop dev dependencies.
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
# Files owned by root and read-only for the runtime user; the chart also mounts the root
# filesystem read-only and gives /tmp as an emptyDir.
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
# Numeric non-root user (matches the chart's runAsUser) so runAsNonRoot can verify it.
USER 10001:10001
EXPOSE 8443 9443 9090
ENTRYPOINT ["node"]
CMD ["dist/control-plane/src/main.js", "--help"]
