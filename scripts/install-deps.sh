#!/usr/bin/env bash
# Installs the Debian 12 packages this project builds and tests with, and only those that are missing.
# Cheap when everything is present (one dpkg-query), so `make test` and `make conform` call it every time.
set -euo pipefail

packages=(
  build-essential cmake make pkg-config         # g++ 12, the build
  ninja-build                                   # Ninja: make's build trees use it when it is there
  dpkg-dev                                      # dpkg-shlibdeps: the Depends of make package's .deb
  libboost-dev libboost-program-options-dev     # Boost 1.74: Asio, Beast (headers), Program_options
  libmsgpack-cxx-dev                            # MessagePack headers (depends on Boost 1.74)
  libssl-dev openssl                            # OpenSSL for TLS; its command line makes the tests' certificates
  nlohmann-json3-dev                            # JSON for vectors, cases and reports
  zlib1g-dev                                    # crc32 for the message store's records
  libgtest-dev libgmock-dev                     # unit tests
  lcov                                          # coverage reports
  clang-16 libclang-rt-16-dev                   # clang 16 with the libFuzzer and sanitizer runtimes (its C++20
                                                # coroutines build the connection engine, for fuzz_management)
  clang-format-16                               # scripts/check-format.sh: the C++ layout (.clang-format), pinned to 16
  python3 python3-msgpack python3-jsonschema    # the independent vector generator and schema checks
  python3-pika amqp-tools                       # a real AMQP 0-9-1 client (pika) and command line for the AMQP tests
  librabbitmq-dev                               # rabbitmq-c: the harness's interop cases and firemq-amqp-bench
  ruby-bunny                                    # Ruby's AMQP client (bunny) for the AMQP smoke test
  rabbitmq-server                               # rabbitmqadmin, RabbitMQ's management CLI, tested against ours
  chromium chromium-driver python3-selenium     # the management UI's tests in a real browser
  prometheus                                    # a real Prometheus scraping /metrics for the Grafana dashboard test
  nodejs                                        # Node.js for the TypeScript example driver (conformance/drivers/ts)
  golang-go                                     # Go 1.19 for the Go example driver (conformance/drivers/go)
  golang-github-vmihailenco-msgpack.v5-dev      # its MessagePack package, and its WebSocket one, as Go sources
  golang-github-gorilla-websocket-dev           # under /usr/share/gocode (the build is offline, in GOPATH mode)
  golang-github-rabbitmq-amqp091-go-dev         # the Go AMQP 0-9-1 client RabbitMQ maintains, for broker.amqp_go
)
# npm, which installs that driver's packages from the npm registry. NodeSource's nodejs package bundles npm and
# conflicts with Debian's npm: ask for the package only when there is no npm command.
command -v npm >/dev/null || packages+=(npm)

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$pkg")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
# A fresh machine has no package lists yet; an old list may name versions that are gone.
"${sudo_cmd[@]}" apt-get update -qq
# No service is started by the install (Debian's policy-rc.d): the tests start their own RabbitMQ node on private
# ports when they need one, never the system's, which would also take ports 5672 and 15672.
policy=/usr/sbin/policy-rc.d
added_policy=false
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo_cmd[@]}" tee "$policy" >/dev/null
  "${sudo_cmd[@]}" chmod +x "$policy"
  added_policy=true
fi
status=0
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" || status=$?
if [ "$added_policy" = true ]; then "${sudo_cmd[@]}" rm -f "$policy"; fi
exit $status
