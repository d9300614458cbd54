#!/usr/bin/env python3
"""The layer check: every #include in the tree follows the folder rules of docs/ARCHITECTURE.md ("Layers").

Each folder of reference-broker/ and harness/ is one layer and may include only the folders listed for it
below (its own included); the folders without I/O may not include network, TLS or event-loop headers either.
A file that breaks a rule is named with the edge it crossed. Test files (*_test.cpp) are exempt: a test may
reach past its layer to build what it tests with.

    scripts/check_layers.py [ROOT]     check the tree at ROOT (default: this checkout); exit 1 on a violation
    scripts/check_layers.py --self-test  prove that the check fails on a forbidden edge of each kind
"""
import os
import re
import sys
import tempfile

# Folder -> the folders its files may include. A folder is "component/layer", or a top-level folder.
BROKER = "reference-broker"
HARNESS = "harness"
MAY_INCLUDE = {
    # The reference broker, from the bottom up.
    f"{BROKER}/access": {"protocol"},
    f"{BROKER}/core": {"protocol", f"{BROKER}/access"},
    f"{BROKER}/session": {"protocol", f"{BROKER}/access", f"{BROKER}/core"},
    f"{BROKER}/amqp": {"protocol", f"{BROKER}/access", f"{BROKER}/core", f"{BROKER}/session"},
    f"{BROKER}/store": {"protocol", f"{BROKER}/access", f"{BROKER}/core"},
    # net never includes management: the HTTP listener takes an HttpApplication the broker hands in.
    f"{BROKER}/net": {"protocol", f"{BROKER}/access", f"{BROKER}/core", f"{BROKER}/session", f"{BROKER}/amqp"},
    f"{BROKER}/management": {"protocol", f"{BROKER}/access", f"{BROKER}/core", f"{BROKER}/session",
                             f"{BROKER}/amqp", f"{BROKER}/store", f"{BROKER}/net"},
    BROKER: {"protocol", f"{BROKER}/access", f"{BROKER}/core", f"{BROKER}/session", f"{BROKER}/amqp",
             f"{BROKER}/store", f"{BROKER}/net", f"{BROKER}/management"},  # main.cpp and broker.h: the wiring
    # The harness never includes the broker's code: it runs the broker as a process, as a vendor's.
    f"{HARNESS}/model": {"protocol"},
    f"{HARNESS}/rules": {"protocol", f"{HARNESS}/model"},
    f"{HARNESS}/client": {"protocol", f"{HARNESS}/model", f"{HARNESS}/rules"},
    f"{HARNESS}/process": {"protocol", f"{HARNESS}/model", f"{HARNESS}/rules", f"{HARNESS}/client"},
    f"{HARNESS}/run": {"protocol", f"{HARNESS}/model", f"{HARNESS}/rules", f"{HARNESS}/client",
                       f"{HARNESS}/process"},
    f"{HARNESS}/proxy": {"protocol", f"{HARNESS}/model", f"{HARNESS}/rules", f"{HARNESS}/client"},
    f"{HARNESS}/client_mode": {"protocol", f"{HARNESS}/model", f"{HARNESS}/rules", f"{HARNESS}/client",
                               f"{HARNESS}/process", f"{HARNESS}/run", f"{HARNESS}/proxy"},
    f"{HARNESS}/reports": {"protocol", f"{HARNESS}/model"},
    f"{HARNESS}/cli": {"protocol"} | {f"{HARNESS}/{layer}" for layer in
                                      ("model", "rules", "client", "process", "run", "proxy", "client_mode",
                                       "reports")},
    # The tools use the harness's client and its broker launcher, not the runner, client mode or reports.
    "tools": {"protocol", "tools", f"{HARNESS}/model", f"{HARNESS}/rules", f"{HARNESS}/client",
              f"{HARNESS}/process"},
    "protocol": set(),
    "vectors": {"protocol"},
    "conformance/drivers/cpp": {"protocol"},  # an example SDK: the wire format and nothing of ours
}

# The folders without I/O: no sockets, event loop, WebSocket or TLS (each reaches the disk only through an
# interface, journal.h and pager.h, but for the reads that EXEMPT_FILE_IO names).
NO_IO = {f"{BROKER}/access", f"{BROKER}/core", f"{BROKER}/session", f"{BROKER}/amqp",
         f"{HARNESS}/model", f"{HARNESS}/rules", f"{HARNESS}/reports"}
NETWORK_HEADERS = re.compile(r"^(boost/asio|boost/beast|openssl/ssl\.h|sys/socket\.h|netinet/|poll\.h|"
                             r"sys/epoll\.h|netdb\.h)")
FILE_IO_HEADERS = re.compile(r"^(fstream|unistd\.h|fcntl\.h|sys/stat\.h|sys/statvfs\.h)$")
# File I/O a no-I/O layer does itself, each for a reason.
EXEMPT_FILE_IO = {
    f"{BROKER}/access/definitions.cpp": "reads a --definitions file at start, before any I/O layer exists",
    f"{BROKER}/core/alarms.cpp": "asks statvfs for the data directory's free space (the disk alarm)",
    f"{BROKER}/core/message_body.cpp": "preads a paged-out body back from the file the pager gave it",
    f"{HARNESS}/model/case_model.cpp": "reads the case files and the catalog",
    f"{HARNESS}/reports/reports.cpp": "writes the report files",
}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
SOURCE_SUFFIXES = (".h", ".cpp", ".hpp", ".cc")


def layer_of(path):
    """The folder rule a file (relative to the root) falls under, or None when no rule covers it."""
    folder = os.path.dirname(path)
    while folder:
        if folder in MAY_INCLUDE:
            return folder
        folder = os.path.dirname(folder)
    return None


def included_layer(target):
    """The layer an include "a/b/c.h" names, or None for a header outside the tree's layers (third party)."""
    layer = layer_of(target)
    if layer is not None:
        return layer
    top = target.split("/")[0]
    return top if top in MAY_INCLUDE else None


def violations(root):
    found = []
    for directory, _, names in os.walk(root):
        rel_dir = os.path.relpath(directory, root)
        if rel_dir.startswith(("build", ".git")) or "/node_modules" in rel_dir:
            continue
        for name in sorted(names):
            if not name.endswith(SOURCE_SUFFIXES):
                continue
            path = os.path.normpath(os.path.join(rel_dir, name))
            layer = layer_of(path)
            if layer is None or name.endswith("_test.cpp"):
                continue
            with open(os.path.join(root, path), encoding="utf-8", errors="replace") as source:
                for number, line in enumerate(source, 1):
                    match = INCLUDE.match(line)
                    if match:
                        found += judge(path, number, layer, match.group(1) == '"', match.group(2))
    return found


def judge(path, number, layer, quoted, target):
    where = f"{path}:{number}"
    if quoted:
        target_layer = included_layer(target)
        if target_layer is None:
            # A bare "name.h" from the file's own folder (the example driver's style) stays in the layer.
            if "/" not in target:
                return []
            return [f"{where}: includes \"{target}\", which is in no layer of the tree"]
        if target_layer != layer and target_layer not in MAY_INCLUDE[layer]:
            return [f"{where}: {layer} may not include {target_layer} (\"{target}\")"]
        return []
    if layer in NO_IO and NETWORK_HEADERS.match(target):
        return [f"{where}: {layer} has no I/O and may not include <{target}>"]
    if layer in NO_IO and FILE_IO_HEADERS.match(target) and path not in EXEMPT_FILE_IO:
        return [f"{where}: {layer} reaches the disk only through interfaces and may not include <{target}>"]
    return []


def self_test():
    """Each kind of forbidden edge, planted in an empty tree, is reported; an allowed edge is not."""
    planted = {
        f"{BROKER}/core/bad_net.h": ('#include "reference-broker/net/asio.h"\n', "core may not include"),
        f"{BROKER}/net/bad_management.cpp": ('#include "reference-broker/management/management_api.h"\n',
                                            "net may not include"),
        f"{BROKER}/session/bad_socket.cpp": ("#include <boost/asio.hpp>\n", "has no I/O"),
        f"{BROKER}/amqp/bad_disk.cpp": ("#include <fstream>\n", "reaches the disk only through interfaces"),
        f"{HARNESS}/reports/bad_run.cpp": ('#include "harness/run/runner.h"\n', "reports may not include"),
        f"{HARNESS}/client/bad_broker.cpp": ('#include "reference-broker/core/queue.h"\n', "may not include"),
        "tools/bad_runner.cpp": ('#include "harness/client_mode/client_mode.h"\n', "tools may not include"),
    }
    allowed = {f"{BROKER}/management/fine.cpp": '#include "reference-broker/net/http_server.h"\n',
               f"{HARNESS}/client_mode/fine.cpp": '#include "harness/run/runner.h"\n'}
    failures = []
    with tempfile.TemporaryDirectory() as root:
        for path, text in list(allowed.items()) + [(p, t) for p, (t, _) in planted.items()]:
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as out:
                out.write(text)
        reported = violations(root)
        for path, (_, expected) in planted.items():
            if not any(line.startswith(path + ":") and expected in line for line in reported):
                failures.append(f"not caught: {path} ({expected})")
        for path in allowed:
            failures += [f"wrongly reported: {line}" for line in reported if line.startswith(path + ":")]
    for failure in failures:
        print(failure)
    print("self-test:", "FAILED" if failures else f"each of the {len(planted)} forbidden edges is caught")
    return 1 if failures else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = violations(root)
    for line in found:
        print(line)
    print(f"layers: {len(found)} include(s) across a forbidden edge" if found else "layers: every include follows the layers")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
