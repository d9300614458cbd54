#!/usr/bin/ruby
# The AMQP 0-9-1 listener with Ruby's bunny (Debian's ruby-bunny), used as its users use it: publish and consume,
# publisher confirms (acks, and nacks from a full reject-publish queue), a queue with x- arguments, and bunny's
# automatic recovery across a restart of the broker, with a durable queue and a persistent message surviving in
# the data directory. Each test class runs its own broker binary on free ports.
#
# Usage: amqp_bunny_test.rb BROKER_EXECUTABLE
require "bunny"
require "fileutils"
require "json"
require "logger"
require "minitest/autorun"
require "set"
require "timeout"
require "tmpdir"

BROKER = ARGV.shift or abort("usage: amqp_bunny_test.rb BROKER_EXECUTABLE")

# firemq-broker with the fire and AMQP listeners on free ports (the others off) and a data directory.
class Broker
  attr_reader :amqp_port

  def initialize(directory)
    @directory = directory
    @amqp_port = 0
    start
  end

  def start
    ports_file = File.join(@directory, "ports.json")
    File.delete(ports_file) if File.exist?(ports_file)
    @log = File.join(@directory, "broker.log")
    @pid = Process.spawn(BROKER, "--bind", "127.0.0.1", "--port", "0", "--tls-port", "off", "--ws-port", "off",
                         "--wss-port", "off", "--amqp-port", @amqp_port.to_s,
                         "--data-dir", File.join(@directory, "data"), "--port-file", ports_file,
                         out: [@log, "a"], err: [@log, "a"])
    deadline = Time.now + 20
    until File.size?(ports_file)
      raise "the broker did not start: #{File.read(@log)[-2000..] || File.read(@log)}" if exited? || Time.now > deadline
      sleep 0.02
    end
    @amqp_port = JSON.parse(File.read(ports_file)).fetch("amqp")  # a restart listens on the same port
  end

  def stop
    return if @pid.nil?
    Process.kill("TERM", @pid)
    Timeout.timeout(10) { Process.wait(@pid) }
    @pid = nil
  end

  def restart
    stop
    start
  end

  def exited?
    Process.waitpid(@pid, Process::WNOHANG) != nil
  end

  # A bunny session as an application opens one; its warnings (about recovery) go to the broker's directory.
  def connect(**options)
    Bunny.new(host: "127.0.0.1", port: @amqp_port, user: "guest", password: "guest",
              logger: Logger.new(File.join(@directory, "bunny.log")), **options).tap(&:start)
  end
end

# Waits up to `seconds` for `block` to be truthy; its last value.
def eventually(seconds = 10)
  deadline = Time.now + seconds
  loop do
    value = yield
    return value if value || Time.now > deadline
    sleep 0.02
  end
end

# One broker for the tests that do not restart it.
class BunnyWithBroker < Minitest::Test
  @@dir = Dir.mktmpdir("firemq-bunny")
  @@broker = Broker.new(@@dir)
  Minitest.after_run do
    @@broker.stop
    FileUtils.remove_entry(@@dir)
  end

  def setup
    @connection = @@broker.connect
    @channel = @connection.create_channel
  end

  def teardown
    @connection.close if @connection.open?
  end

  def test_publish_and_consume_with_properties_and_acks
    queue = @channel.queue("bunny.consume", auto_delete: false)
    10.times do |i|
      @channel.default_exchange.publish("message #{i}", routing_key: queue.name, content_type: "text/plain",
                                        headers: { "index" => i }, message_id: "m#{i}")
    end
    received = Queue.new
    consumer = queue.subscribe(manual_ack: true) do |delivery, properties, body|
      received << [body, properties.content_type, properties.headers["index"], properties.message_id]
      @channel.ack(delivery.delivery_tag)
    end
    got = Array.new(10) { Timeout.timeout(5) { received.pop } }
    assert_equal (0...10).map { |i| ["message #{i}", "text/plain", i, "m#{i}"] }, got
    consumer.cancel
    assert eventually { queue.message_count.zero? }, "acked messages are gone from the queue"
    queue.delete
  end

  def test_publisher_confirms_ack_every_publish
    @channel.confirm_select
    queue = @channel.queue("bunny.confirms")
    100.times { |i| @channel.default_exchange.publish("confirmed #{i}", routing_key: queue.name) }
    assert @channel.wait_for_confirms, "every publish confirmed with basic.ack"
    assert_empty @channel.nacked_set
    assert_equal 100, queue.message_count
    queue.delete
  end

  def test_reject_publish_overflow_is_nacked
    @channel.confirm_select
    queue = @channel.queue("bunny.full", arguments: { "x-max-length" => 1, "x-overflow" => "reject-publish" })
    @channel.default_exchange.publish("fits", routing_key: queue.name)
    @channel.default_exchange.publish("does not fit", routing_key: queue.name)
    refute @channel.wait_for_confirms, "the publish past x-max-length is nacked"
    assert_equal Set[2], @channel.nacked_set.to_set
    _, _, body = queue.pop
    assert_equal "fits", body
    queue.delete
  end

  def test_queue_with_max_length_and_ttl_arguments
    queue = @channel.queue("bunny.args", arguments: { "x-max-length" => 2, "x-message-ttl" => 60_000 })
    5.times { |i| @channel.default_exchange.publish("m#{i}", routing_key: queue.name) }
    assert eventually { queue.message_count == 2 }, "x-max-length 2 keeps 2 of 5, not #{queue.message_count}"
    bodies = Array.new(2) { queue.pop(manual_ack: false)[2] }
    assert_equal %w[m3 m4], bodies, "x-max-length drops from the head"
    # The same declare with other arguments is refused as RabbitMQ refuses it: 406 PRECONDITION_FAILED.
    error = assert_raises(Bunny::PreconditionFailed) do
      @connection.create_channel.queue("bunny.args", arguments: { "x-max-length" => 3, "x-message-ttl" => 60_000 })
    end
    assert_match(/x-max-length/, error.message)
    queue.delete
  end
end

# Bunny's automatic recovery across a restart of the broker on the same port and data directory.
class BunnyRecovery < Minitest::Test
  def setup
    @dir = Dir.mktmpdir("firemq-bunny-restart")
    @broker = Broker.new(@dir)
  end

  def teardown
    @broker.stop
    FileUtils.remove_entry(@dir)
  end

  def test_recovers_after_restart_with_durable_queue_and_persistent_message
    recovered = Queue.new
    connection = @broker.connect(automatically_recover: true, network_recovery_interval: 0.2)
    connection.after_recovery_completed { recovered << true }
    channel = connection.create_channel
    channel.confirm_select
    kept = channel.queue("bunny.kept", durable: true)
    channel.default_exchange.publish("survives the restart", routing_key: kept.name, persistent: true)
    assert channel.wait_for_confirms, "the persistent message is confirmed before the restart"
    live = channel.queue("bunny.live", durable: true)
    deliveries = Queue.new
    live.subscribe { |_, _, body| deliveries << body }

    @broker.restart
    assert Timeout.timeout(20) { recovered.pop }, "bunny reconnected and recovered its channel"

    # The durable queue and its persistent message came back from the data directory.
    # (Its delivery-mode is not in the get-ok: docs/spec-notes.md, "The interop table, where it is silent".)
    _, _, body = channel.basic_get(kept.name, manual_ack: false)
    assert_equal "survives the restart", body
    # The consumer was recovered: a confirmed publish after the restart reaches it, on the same session. (On a
    # new channel: Debian's bunny 2.19 miscounts a multiple ack on a recovered confirm channel, whichever broker
    # sends it; fixed upstream by ruby-amqp/bunny#639.)
    publisher = connection.create_channel
    publisher.confirm_select
    publisher.default_exchange.publish("after the restart", routing_key: live.name)
    assert publisher.wait_for_confirms, "confirms work after the restart"
    assert_equal "after the restart", Timeout.timeout(5) { deliveries.pop }
    connection.close
  end
end
