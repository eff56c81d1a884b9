# Build the manager and the MCP gateway as static binaries, then ship them
# alone on a distroless nonroot base: no shell, no package manager, uid
# 65532. The manager is the entrypoint; the gateway's Deployment runs
# /toolcatalog-gateway.
# The build runs on the builder's own platform and cross-compiles for each
# target (docker buildx --platform linux/amd64,linux/arm64).
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY internal/ internal/
COPY pkg/ pkg/
ARG TARGETOS TARGETARCH VERSION=dev
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -tags grpcnotrace -ldflags="-s -w -X main.version=${VERSION}" -o /out/manager ./cmd/manager && \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -tags grpcnotrace -ldflags="-s -w -X main.version=${VERSION}" -o /out/toolcatalog-gateway ./cmd/toolcatalog-gateway

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/manager /manager
COPY --from=build /out/toolcatalog-gateway /toolcatalog-gateway
USER 65532:65532
ENTRYPOINT ["/manager"]
