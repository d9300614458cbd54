// GET /metrics: the broker's figures in Prometheus's text exposition format (version 0.0.4), named as
// rabbitmq_prometheus names them where RabbitMQ has an equivalent, so that dashboards built for RabbitMQ read them;
// firemq_ for the rest. Every value is a whole number, written as one (no exponent that would round it), except the
// fsync histogram's sum of seconds, a decimal fraction.
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "reference-broker/management/management_api.h"
#include "reference-broker/core/memory_account.h"
#include "reference-broker/store/storage_io.h"

namespace firemq {
namespace {

// A label value: valid UTF-8 (a name that is not gets U+FFFD for its bad bytes, or Prometheus would drop the whole
// scrape), with backslash, quote and newline escaped, as the format requires.
std::string label(std::string_view raw) {
  const std::string text =
      nlohmann::json::parse(nlohmann::json(std::string(raw)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
          .get<std::string>();
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

class Exposition {
 public:
  // One metric family: its help and type lines, then its samples.
  void family(const char* name, const char* type, const char* help) {
    out_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  void sample(const char* name, std::uint64_t value, const std::string& labels = "") {
    sample_text(name, std::to_string(value), labels);
  }
  void sample_text(const std::string& name, const std::string& value, const std::string& labels = "") {
    out_ << name;
    if (!labels.empty()) out_ << '{' << labels << '}';
    out_ << ' ' << value << '\n';
  }
  void single(const char* name, const char* type, const char* help, std::uint64_t value) {
    family(name, type, help);
    sample(name, value);
  }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

// Nanoseconds as seconds, exactly (a decimal fraction, no exponent).
std::string seconds(std::uint64_t nanos) {
  std::string fraction = std::to_string(nanos % 1000000000);
  return std::to_string(nanos / 1000000000) + "." + std::string(9 - fraction.size(), '0') + fraction;
}

// The fsyncs of the data directory (storage_io.h) as a Prometheus histogram in seconds: cumulative buckets, the
// sum and the count.
void fsync_histogram(Exposition& e) {
  const StorageStats& stats = storage_stats();
  const char* name = "firemq_store_fsync_seconds";
  e.family(name, "histogram", "fsyncs of the message store and the definitions file, and their duration");
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < std::size(StorageStats::kBucketMicros); ++i) {
    cumulative += stats.buckets[i].load(std::memory_order_relaxed);
    e.sample_text(std::string(name) + "_bucket", std::to_string(cumulative),
                  "le=\"" + seconds(StorageStats::kBucketMicros[i] * 1000) + "\"");
  }
  const std::uint64_t count = stats.fsyncs.load(std::memory_order_relaxed);
  e.sample_text(std::string(name) + "_bucket", std::to_string(count), "le=\"+Inf\"");
  e.sample_text(std::string(name) + "_sum", seconds(stats.total_nanos.load(std::memory_order_relaxed)));
  e.sample_text(std::string(name) + "_count", std::to_string(count));
}

// The process's own figures, as rabbitmq_prometheus gives the Erlang VM's: descriptors open and allowed (the soft
// RLIMIT_NOFILE, raised at start), and the resident set (what the OS holds; firemq_memory_used_bytes is what the
// watermark measures).
void process_figures(Exposition& e) {
  std::error_code ec;
  std::uint64_t open = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    ++open;
  }
  e.single("rabbitmq_process_open_fds", "gauge", "Open file descriptors", open);
  rlimit limit{};
  e.single("rabbitmq_process_max_fds", "gauge", "Open file descriptors limit",
           getrlimit(RLIMIT_NOFILE, &limit) == 0 ? static_cast<std::uint64_t>(limit.rlim_cur) : 0);
  std::uint64_t pages = 0, resident = 0;
  std::ifstream statm("/proc/self/statm");
  statm >> pages >> resident;
  e.single("rabbitmq_process_resident_memory_bytes", "gauge", "Memory used in bytes (the resident set)",
           resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)));
}

}  // namespace

std::string ManagementApi::metrics() const {
  Exposition e;
  // What every query of RabbitMQ's stock Grafana dashboards joins on (`* on(instance) group_left(rabbitmq_cluster,
  // rabbitmq_node) rabbitmq_identity_info`): one node, which is its own cluster.
  e.family("rabbitmq_identity_info", "untyped", "RabbitMQ node & cluster identity info");
  e.sample("rabbitmq_identity_info", 1,
           std::string("rabbitmq_node=\"") + kNodeName + "\",rabbitmq_cluster=\"" + kNodeName +
               "\",rabbitmq_cluster_permanent_id=\"firemq-" + kNodeName + "\"");
  e.family("rabbitmq_build_info", "untyped", "RabbitMQ & Erlang/OTP version info");
  e.sample("rabbitmq_build_info", 1,
           std::string("rabbitmq_version=\"") + kServerVersion + "\",product_name=\"FireMQ\",product_version=\"" +
               kServerVersion + "\"");
  std::size_t queues = 0, consumers = 0, connections = 0, ready = 0, unacked = 0;
  for (const auto& [name, vhost] : env_.core.vhosts()) {
    queues += vhost->queues().size();
    for (const auto& [qname, q] : vhost->queues()) {
      consumers += q->consumer_count();
      ready += q->ready_count();
      unacked += q->unacked_count();
    }
  }
  // Aggregated over every queue, as rabbitmq_prometheus's /metrics gives them (per queue below, as detailed).
  e.single("rabbitmq_queue_messages_ready", "gauge", "Messages ready to be delivered to consumers",
           static_cast<std::uint64_t>(ready));
  e.single("rabbitmq_queue_messages_unacked", "gauge", "Messages delivered to consumers but not yet acknowledged",
           static_cast<std::uint64_t>(unacked));
  e.single("rabbitmq_queue_messages", "gauge", "Sum of ready and unacknowledged messages - total queue depth",
           static_cast<std::uint64_t>(ready + unacked));
  for (const Connection* c : env_.connections.all()) connections += c->session().state() == Session::State::open;
  std::size_t channels = connections;  // a FireMQ connection is one channel
  for (const AmqpConnection* c : env_.amqp_connections.all()) {
    if (c->core().state() != AmqpConnectionCore::State::open) continue;
    ++connections;
    channels += c->core().open_channel_count();
  }
  e.single("rabbitmq_connections", "gauge", "Connections currently open (FireMQ and AMQP 0-9-1)",
           static_cast<std::uint64_t>(connections));
  e.single("rabbitmq_channels", "gauge", "Channels currently open (AMQP channels, and one per FireMQ connection)",
           static_cast<std::uint64_t>(channels));
  e.single("rabbitmq_queues", "gauge", "Queues available", static_cast<std::uint64_t>(queues));
  e.single("rabbitmq_consumers", "gauge", "Consumers currently connected", static_cast<std::uint64_t>(consumers));

  e.family("rabbitmq_detailed_queue_messages_ready", "gauge", "Messages ready to be delivered to consumers");
  for (const auto& [name, vhost] : env_.core.vhosts()) {
    for (const auto& [qname, q] : vhost->queues()) {
      e.sample("rabbitmq_detailed_queue_messages_ready", static_cast<std::uint64_t>(q->ready_count()),
               "vhost=\"" + label(name) + "\",queue=\"" + label(qname) + "\"");
    }
  }
  e.family("rabbitmq_detailed_queue_messages_unacked", "gauge", "Messages delivered to consumers but not yet acknowledged");
  for (const auto& [name, vhost] : env_.core.vhosts()) {
    for (const auto& [qname, q] : vhost->queues()) {
      e.sample("rabbitmq_detailed_queue_messages_unacked", static_cast<std::uint64_t>(q->unacked_count()),
               "vhost=\"" + label(name) + "\",queue=\"" + label(qname) + "\"");
    }
  }

  const MessageCounters& c = env_.core.counters();
  e.single("rabbitmq_global_messages_received_total", "counter", "Messages published by clients",
           static_cast<std::uint64_t>(c.published));
  e.single("rabbitmq_global_messages_delivered_total", "counter", "Messages delivered to consumers (deliver and get)",
           static_cast<std::uint64_t>(c.delivered));
  e.single("rabbitmq_global_messages_acknowledged_total", "counter", "Messages acknowledged by consumers",
           static_cast<std::uint64_t>(c.acknowledged));
  e.single("rabbitmq_global_messages_confirmed_total", "counter", "Messages confirmed to publishers",
           static_cast<std::uint64_t>(c.confirmed));
  e.single("rabbitmq_global_messages_unroutable_returned_total", "counter", "Mandatory messages returned unroutable",
           static_cast<std::uint64_t>(c.returned));

  // Flow control (docs/spec-notes.md, "What the memory watermark measures"): the account, not the RSS.
  e.single("firemq_memory_used_bytes", "gauge", "Bytes of live messages and unsent frames (what the watermark measures)",
           static_cast<std::uint64_t>(MemoryAccount::in_use()));
  e.single("rabbitmq_resident_memory_limit_bytes", "gauge", "Memory high watermark in bytes",
           static_cast<std::uint64_t>(env_.alarms.memory_high_watermark()));
  std::error_code ec;
  const auto space = std::filesystem::space(env_.config.alarms.disk_path, ec);
  e.single("rabbitmq_disk_space_available_bytes", "gauge", "Disk space available on the data directory's filesystem",
           ec ? 0 : static_cast<std::uint64_t>(space.available));
  e.single("rabbitmq_disk_space_available_limit_bytes", "gauge", "Free disk space low watermark in bytes",
           static_cast<std::uint64_t>(env_.config.alarms.disk_free_limit));
  e.single("rabbitmq_alarms_memory_used_watermark", "gauge", "1 while the memory alarm is in effect",
           env_.alarms.memory() ? 1 : 0);
  e.single("rabbitmq_alarms_free_disk_space_watermark", "gauge",
           "1 while the disk alarm is in effect (free space below the limit, or the message store failed)",
           env_.alarms.disk() ? 1 : 0);
  e.single("firemq_storage_failed", "gauge", "1 once a write or fsync of the data directory failed (until restart)",
           env_.alarms.storage_failure().empty() ? 0 : 1);
  fsync_histogram(e);
  process_figures(e);
  return e.text();
}

}  // namespace firemq
