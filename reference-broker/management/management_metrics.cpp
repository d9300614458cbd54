// GET /metrics: the broker's figures in Prometheus's text exposition format (version 0.0.4), named as
// rabbitmq_prometheus names them where RabbitMQ has an equivalent, so that dashboards built for RabbitMQ read them;
// firemq_ for the rest. Every value is a whole number, written as one (no exponent that would round it), except the
// fsync histogram's sum of seconds, a decimal fraction.
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "reference-broker/core/memory_account.h"
#include "reference-broker/management/management_api.h"
#include "reference-broker/store/storage_io.h"

namespace firemq {
namespace {

// A label value: valid UTF-8 (a name that is not gets U+FFFD for its bad bytes, or Prometheus would drop the whole
// scrape), with backslash, quote and newline escaped, as the format requires.
std::string label(std::string_view raw) {
  const std::string text =
      nlohmann::json::parse(
          nlohmann::json(std::string(raw)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
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

// The process's figures (process_figures), as rabbitmq_prometheus names the Erlang VM's.
void process_exposition(Exposition& e) {
  const ProcessFigures p = process_figures();
  e.single("rabbitmq_process_open_fds", "gauge", "Open file descriptors", p.open_fds);
  e.single("rabbitmq_process_open_tcp_sockets", "gauge", "Open sockets (the listeners' and the connections')",
           p.open_sockets);
  e.single("rabbitmq_process_max_fds", "gauge", "Open file descriptors limit", p.max_fds);
  e.single("rabbitmq_process_max_tcp_sockets", "gauge", "Open sockets limit (the descriptor limit)", p.max_fds);
  e.single("rabbitmq_process_resident_memory_bytes", "gauge", "Memory used in bytes (the resident set)",
           p.resident_bytes);
}

// What is open now, summed over the model at scrape time.
struct OpenFigures {
  std::uint64_t queues = 0, consumers = 0, ready = 0, unacked = 0;
  std::uint64_t connections = 0, channels = 0;
  std::uint64_t publishers = 0;   // open channels that have published, as RabbitMQ's global_publishers
  std::uint64_t unconfirmed = 0;  // publishes whose confirm waits for the disk
  void add_channel(const Session& session) {
    ++channels;
    publishers += session.has_published();
    unconfirmed += session.unconfirmed_count();
  }
};

OpenFigures open_figures(const ManagementEnv& env) {
  OpenFigures f;
  for (const auto& [name, vhost] : env.core.vhosts()) {
    f.queues += vhost->queues().size();
    for (const auto& [qname, q] : vhost->queues()) {
      f.consumers += q->consumer_count();
      f.ready += q->ready_count();
      f.unacked += q->unacked_count();
    }
  }
  for (const Connection* c : env.connections.all()) {
    if (!connection_owner(*c)) continue;  // in its handshake, or closing
    ++f.connections;
    if (const Session* s = c->fire_session()) f.add_channel(*s);  // a FireMQ connection is one channel
    if (const AmqpConnectionCore* core = c->amqp_core()) {
      for (const auto& [number, channel] : core->channels()) {
        if (channel->state() == AmqpChannel::State::open && channel->session() != nullptr) {
          f.add_channel(*channel->session());
        }
      }
    }
  }
  return f;
}

// Who the node is, on both endpoints: every query of RabbitMQ's stock Grafana dashboards joins on it (`* on(instance)
// group_left(rabbitmq_cluster, rabbitmq_node) rabbitmq_identity_info`). One node, which is its own cluster.
void identity(Exposition& e, std::string_view node) {
  e.family("rabbitmq_identity_info", "untyped", "RabbitMQ node & cluster identity info");
  e.sample("rabbitmq_identity_info", 1,
           "rabbitmq_node=\"" + label(node) + "\",rabbitmq_cluster=\"" + label(node) +
               "\",rabbitmq_cluster_permanent_id=\"firemq-" + label(node) + "\"");
  e.family("rabbitmq_build_info", "untyped", "RabbitMQ & Erlang/OTP version info");
  e.sample("rabbitmq_build_info", 1,
           std::string("rabbitmq_version=\"") + kServerVersion + "\",product_name=\"FireMQ\",product_version=\"" +
               kServerVersion + "\"");
}

void churn(Exposition& e, const std::string& prefix, const Core& core) {
  const ChurnCounters& c = core.churn();
  const ConnectionCounts& counts = core.connection_counts();
  const auto counter = [&](const char* name, const char* help, std::uint64_t value) {
    e.single((prefix + name).c_str(), "counter", help, value);
  };
  counter("connections_opened_total", "Total number of connections opened", counts.opened_total());
  counter("connections_closed_total", "Total number of connections closed or terminated", counts.closed_total());
  counter("channels_opened_total", "Total number of channels opened", c.channels_opened);
  counter("channels_closed_total", "Total number of channels closed", c.channels_closed);
  counter("queues_declared_total", "Total number of queues declared", c.queues_declared);
  counter("queues_created_total", "Total number of queues created", c.queues_created);
  counter("queues_deleted_total", "Total number of queues deleted", c.queues_deleted);
}

// The message counters twice, as rabbitmq_prometheus gives them: summed over channels (rabbitmq_channel_*, what the
// RabbitMQ-Overview dashboard reads) and globally (rabbitmq_global_*, by protocol there; one figure here for
// FireMQ and AMQP together).
void message_counters(Exposition& e, const MessageCounters& c) {
  const auto counter = [&](const char* name, const char* help, std::uint64_t value) {
    e.single(name, "counter", help, value);
  };
  counter("rabbitmq_channel_messages_published_total",
          "Total number of messages published into an exchange on a channel", c.published);
  counter("rabbitmq_channel_messages_confirmed_total",
          "Total number of messages published into an exchange and confirmed on the channel", c.confirmed);
  counter(
      "rabbitmq_channel_messages_unroutable_returned_total",
      "Total number of messages published as mandatory into an exchange and returned to the publisher as unroutable",
      c.returned);
  counter("rabbitmq_channel_messages_unroutable_dropped_total",
          "Total number of messages published as non-mandatory into an exchange and dropped as unroutable",
          c.unroutable_dropped);
  counter("rabbitmq_channel_get_ack_total",
          "Total number of messages fetched with basic.get in manual acknowledgement mode", c.got_manual_ack);
  counter("rabbitmq_channel_get_total",
          "Total number of messages fetched with basic.get in automatic acknowledgement mode", c.got_auto_ack);
  counter("rabbitmq_channel_get_empty_total", "Total number of times basic.get operations fetched no message",
          c.get_empty);
  counter("rabbitmq_channel_messages_delivered_ack_total",
          "Total number of messages delivered to consumers in manual acknowledgement mode", c.consumed_manual_ack);
  counter("rabbitmq_channel_messages_delivered_total",
          "Total number of messages delivered to consumers in automatic acknowledgement mode", c.consumed_auto_ack);
  counter("rabbitmq_channel_messages_redelivered_total", "Total number of messages redelivered to consumers",
          c.redelivered);
  counter("rabbitmq_channel_messages_acked_total", "Total number of messages acknowledged by consumers",
          c.acknowledged);
  counter("rabbitmq_queue_messages_published_total", "Total number of messages published to queues", c.enqueued);

  counter("rabbitmq_global_messages_received_total", "Total number of messages received from publishers", c.published);
  counter("rabbitmq_global_messages_routed_total", "Total number of messages routed to queues or streams", c.routed);
  counter("rabbitmq_global_messages_unroutable_dropped_total",
          "Total number of messages published as non-mandatory into an exchange and dropped as unroutable",
          c.unroutable_dropped);
  counter(
      "rabbitmq_global_messages_unroutable_returned_total",
      "Total number of messages published as mandatory into an exchange and returned to the publisher as unroutable",
      c.returned);
  counter("rabbitmq_global_messages_confirmed_total", "Total number of messages confirmed to publishers", c.confirmed);
  counter("rabbitmq_global_messages_delivered_total", "Total number of messages delivered to consumers", c.delivered);
  counter("rabbitmq_global_messages_delivered_consume_manual_ack_total",
          "Total number of messages delivered to consumers using manual acknowledgement mode", c.consumed_manual_ack);
  counter("rabbitmq_global_messages_delivered_consume_auto_ack_total",
          "Total number of messages delivered to consumers using automatic acknowledgement mode", c.consumed_auto_ack);
  counter("rabbitmq_global_messages_delivered_get_manual_ack_total",
          "Total number of messages delivered to consumers using basic.get with manual acknowledgement mode",
          c.got_manual_ack);
  counter("rabbitmq_global_messages_delivered_get_auto_ack_total",
          "Total number of messages delivered to consumers using basic.get with automatic acknowledgement mode",
          c.got_auto_ack);
  counter("rabbitmq_global_messages_get_empty_total", "Total number of times basic.get operations fetched no message",
          c.get_empty);
  counter("rabbitmq_global_messages_redelivered_total", "Total number of messages redelivered to consumers",
          c.redelivered);
  counter("rabbitmq_global_messages_acknowledged_total", "Total number of messages acknowledged by consumers",
          c.acknowledged);
}

// The flow-control figures (docs/spec-notes.md, "What the memory watermark measures"): the account, not the RSS.
void resources(Exposition& e, const ManagementEnv& env) {
  e.single("firemq_memory_used_bytes", "gauge",
           "Bytes of live messages and unsent frames (what the watermark measures)",
           static_cast<std::uint64_t>(MemoryAccount::in_use()));
  e.single("rabbitmq_resident_memory_limit_bytes", "gauge", "Memory high watermark in bytes",
           static_cast<std::uint64_t>(env.alarms.memory_high_watermark()));
  std::error_code ec;
  const auto space = std::filesystem::space(env.config.alarms.disk_path, ec);
  e.single("rabbitmq_disk_space_available_bytes", "gauge", "Disk space available on the data directory's filesystem",
           ec ? 0 : static_cast<std::uint64_t>(space.available));
  e.single("rabbitmq_disk_space_available_limit_bytes", "gauge", "Free disk space low watermark in bytes",
           static_cast<std::uint64_t>(env.config.alarms.disk_free_limit));
  e.single("rabbitmq_alarms_memory_used_watermark", "gauge", "1 while the memory alarm is in effect",
           env.alarms.memory() ? 1 : 0);
  e.single("rabbitmq_alarms_free_disk_space_watermark", "gauge",
           "1 while the disk alarm is in effect (free space below the limit, or the message store failed)",
           env.alarms.disk() ? 1 : 0);
  e.single("firemq_storage_failed", "gauge", "1 once a write or fsync of the data directory failed (until restart)",
           env.alarms.storage_failure().empty() ? 0 : 1);
}

// One per-queue family of /metrics/detailed: a sample per queue of the vhosts asked for.
void per_queue(Exposition& e, const ManagementEnv& env, const std::set<std::string>& vhosts, const char* name,
               const char* help, const std::function<std::uint64_t(const Queue&)>& value) {
  const std::string full = std::string("rabbitmq_detailed_") + name;
  e.family(full.c_str(), "gauge", help);
  for (const auto& [vname, vhost] : env.core.vhosts()) {
    if (!vhosts.empty() && !vhosts.count(vname)) continue;
    for (const auto& [qname, q] : vhost->queues()) {
      e.sample(full.c_str(), value(*q), "vhost=\"" + label(vname) + "\",queue=\"" + label(qname) + "\"");
    }
  }
}

}  // namespace

ProcessFigures process_figures() {
  ProcessFigures p;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++p.open_fds;
    std::error_code link_error;
    p.open_sockets += std::filesystem::read_symlink(it->path(), link_error).native().starts_with("socket:");
  }
  rlimit limit{};
  p.max_fds = getrlimit(RLIMIT_NOFILE, &limit) == 0 ? static_cast<std::uint64_t>(limit.rlim_cur) : 0;
  std::uint64_t pages = 0, resident = 0;
  std::ifstream statm("/proc/self/statm");
  statm >> pages >> resident;
  p.resident_bytes = resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  return p;
}

std::string ManagementApi::metrics() const {
  Exposition e;
  identity(e, kNodeName);
  const OpenFigures open = open_figures(env_);
  // Aggregated over every queue and channel, as rabbitmq_prometheus's /metrics gives them (per queue: detailed).
  e.single("rabbitmq_queue_messages_ready", "gauge", "Messages ready to be delivered to consumers", open.ready);
  e.single("rabbitmq_queue_messages_unacked", "gauge", "Messages delivered to consumers but not yet acknowledged",
           open.unacked);
  e.single("rabbitmq_queue_messages", "gauge", "Sum of ready and unacknowledged messages - total queue depth",
           open.ready + open.unacked);
  e.single("rabbitmq_queue_consumers", "gauge", "Consumers on a queue", open.consumers);
  e.single("rabbitmq_connections", "gauge", "Connections currently open (FireMQ and AMQP 0-9-1)", open.connections);
  e.single("rabbitmq_channels", "gauge", "Channels currently open (AMQP channels, and one per FireMQ connection)",
           open.channels);
  e.single("rabbitmq_queues", "gauge", "Queues available", open.queues);
  e.single("rabbitmq_consumers", "gauge", "Consumers currently connected", open.consumers);
  e.single("rabbitmq_channel_consumers", "gauge", "Consumers on a channel", open.consumers);
  e.single("rabbitmq_channel_messages_unacked", "gauge", "Delivered but not yet acknowledged messages", open.unacked);
  e.single("rabbitmq_channel_messages_unconfirmed", "gauge", "Published but not yet confirmed messages",
           open.unconfirmed);
  e.single("rabbitmq_global_publishers", "gauge", "Current number of publishers", open.publishers);
  e.single("rabbitmq_global_consumers", "gauge", "Current number of consumers", open.consumers);
  churn(e, "rabbitmq_", env_.core);
  message_counters(e, env_.core.counters());
  resources(e, env_);
  fsync_histogram(e);
  process_exposition(e);
  return e.text();
}

std::string ManagementApi::detailed_metrics(const std::set<std::string>& families,
                                            const std::set<std::string>& vhosts) const {
  // Only the families asked for, as rabbitmq_prometheus's /metrics/detailed (none: only who the node is); a family
  // this broker does not have is left out, as RabbitMQ leaves out one it does not know.
  Exposition e;
  if (families.count("connection_churn_metrics")) churn(e, "rabbitmq_detailed_", env_.core);
  if (families.count("queue_coarse_metrics")) {
    per_queue(e, env_, vhosts, "queue_messages_ready", "Messages ready to be delivered to consumers",
              [](const Queue& q) { return q.ready_count(); });
    per_queue(e, env_, vhosts, "queue_messages_unacked", "Messages delivered to consumers but not yet acknowledged",
              [](const Queue& q) { return q.unacked_count(); });
    per_queue(e, env_, vhosts, "queue_messages", "Sum of ready and unacknowledged messages - total queue depth",
              [](const Queue& q) { return q.ready_count() + q.unacked_count(); });
  }
  if (families.count("queue_consumer_count") || families.count("queue_metrics")) {
    per_queue(e, env_, vhosts, "queue_consumers", "Consumers on a queue",
              [](const Queue& q) { return q.consumer_count(); });
  }
  if (families.count("queue_metrics")) {
    per_queue(e, env_, vhosts, "queue_messages_ready_bytes", "Size in bytes of ready messages",
              [](const Queue& q) { return q.ready_bytes(); });
  }
  identity(e, kNodeName);
  return e.text();
}

}  // namespace firemq
