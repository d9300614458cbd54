package amqpgo

// One test per item of docs/spec-notes.md, "Channel semantics RabbitMQ's clients rely on" (Test01 to Test16) and
// per RabbitMQ extension (TestE1 to TestE5), as amqp091-go's users meet them. A verdict that something did not
// happen is read from the broker's state after it must have happened (a queue's ready count, the order of what
// comes after), never from a quiet period.

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// publishVia publishes through `exchange` with confirms, as publish does through the default exchange.
func publishVia(t *testing.T, c *client, exchange, key string, msgs ...amqp.Publishing) {
	t.Helper()
	ch := c.channel()
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatalf("confirm.select: %v", err)
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, len(msgs)))
	for _, msg := range msgs {
		if err := ch.Publish(exchange, key, false, false, msg); err != nil {
			t.Fatalf("basic.publish: %v", err)
		}
	}
	for range msgs {
		select {
		case confirm := <-confirms:
			if !confirm.Ack {
				t.Fatalf("publish %d to %s/%s was nacked", confirm.DeliveryTag, exchange, key)
			}
		case <-time.After(deadline):
			t.Fatalf("no confirm within %v", deadline)
		}
	}
}

func bodies(names ...string) []amqp.Publishing {
	msgs := make([]amqp.Publishing, len(names))
	for i, n := range names {
		msgs[i] = body(n)
	}
	return msgs
}

// receiveAny is the next delivery of any of the consumers, and which one it went to.
func receiveAny(t *testing.T, consumers ...<-chan amqp.Delivery) (int, amqp.Delivery) {
	t.Helper()
	timeout := time.After(deadline)
	for {
		for i, c := range consumers {
			select {
			case d := <-c:
				return i, d
			default:
			}
		}
		select {
		case <-timeout:
			t.Fatalf("no delivery to any consumer within %v", deadline)
		case <-time.After(time.Millisecond):
		}
	}
}

// describe writes a field value with its Go type, which amqp091-go chooses by the field's type letter.
func describe(v interface{}) string {
	switch x := v.(type) {
	case amqp.Table:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ": " + describe(x[k])
		}
		return "Table{" + strings.Join(parts, ", ") + "}"
	case []interface{}:
		parts := make([]string, len(x))
		for i, item := range x {
			parts[i] = describe(item)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case time.Time:
		return "time.Time(" + x.UTC().Format(time.RFC3339) + ")"
	default:
		return fmt.Sprintf("%T(%v)", v, v)
	}
}

// 1. An AMQP consumer gets each header in the field-table type its AMQP publisher sent (b, B, s, I, l, f, d, D,
// T, nested F and A; amqp091-go writes no u or i).
func Test01_FieldTableTypesComeBackAsPublished(t *testing.T) {
	begin(t)
	c := dial(t)
	ch := c.channel()
	q := exclusiveQueue(t, ch, "", nil)
	when := time.Unix(1700000000, 0)
	headers := amqp.Table{
		"int8": int8(-5), "uint8": uint8(200), "int16": int16(-300), "int32": int32(-70000),
		"int64": int64(-5000000000), "float32": float32(1.5), "float64": 2.25,
		"decimal": amqp.Decimal{Scale: 2, Value: 12345}, "timestamp": when, "string": "s", "bytes": []byte{0, 1},
		"bool": true, "void": nil,
		"nested": amqp.Table{"inner": int16(7), "deeper": amqp.Table{"b": int8(-1), "when": time.Unix(1700000001, 0)}},
		"array": []interface{}{int8(1), int16(2), int32(3), when, amqp.Decimal{Scale: 1, Value: 5},
			amqp.Table{"k": float32(0.5)}, []interface{}{uint8(9)}},
	}
	want := describe(headers)
	publish(t, c, q, amqp.Publishing{Headers: headers, Body: []byte("got")})
	if got := describe(get(t, ch, q, true).Headers); got != want {
		t.Errorf("basic.get-ok's headers:\n got %s\nwant %s", got, want)
	}
	deliveries := consume(t, ch, q, "", true, false, nil)
	publish(t, c, q, amqp.Publishing{Headers: headers, Body: []byte("consumed")})
	if got := describe(receive(t, deliveries, "basic.deliver").Headers); got != want {
		t.Errorf("basic.deliver's headers:\n got %s\nwant %s", got, want)
	}
}

// 2a. basic.qos global=false is each consumer's own prefetch.
func Test02a_PrefetchIsPerConsumer(t *testing.T) {
	begin(t)
	c := dial(t)
	ch := c.channel()
	q := exclusiveQueue(t, ch, "", nil)
	if err := ch.Qos(2, 0, false); err != nil {
		t.Fatal(err)
	}
	first := consume(t, ch, q, "first", false, false, nil)
	second := consume(t, ch, q, "second", false, false, nil)
	publish(t, c, q, bodies("1", "2", "3", "4", "5", "6")...)
	for i := 0; i < 2; i++ {
		receive(t, first, "the first consumer's prefetch of 2")
		receive(t, second, "the second consumer's prefetch of 2")
	}
	if n := ready(t, ch, q); n != 2 {
		t.Errorf("two consumers with prefetch 2 each hold 4 of 6 messages: %d ready, want 2", n)
	}
}

// 2b. basic.qos global=true bounds the channel's consumers together.
func Test02b_GlobalPrefetchIsChannelWide(t *testing.T) {
	begin(t)
	c := dial(t)
	ch := c.channel()
	q := exclusiveQueue(t, ch, "", nil)
	if err := ch.Qos(3, 0, true); err != nil {
		t.Fatal(err)
	}
	first := consume(t, ch, q, "first", false, false, nil)
	second := consume(t, ch, q, "second", false, false, nil)
	publish(t, c, q, bodies("1", "2", "3", "4", "5", "6")...)
	var last amqp.Delivery
	for i := 0; i < 3; i++ {
		_, last = receiveAny(t, first, second)
	}
	if n := ready(t, ch, q); n != 3 {
		t.Fatalf("a global prefetch of 3 lets the channel's two consumers hold 3 of 6 together: %d ready, want 3", n)
	}
	if err := last.Ack(false); err != nil {
		t.Fatal(err)
	}
	receiveAny(t, first, second) // one ack, one more delivery
	if n := ready(t, ch, q); n != 2 {
		t.Errorf("after one ack, 4 of 6 delivered: %d ready, want 2", n)
	}
}

// 2c. Both limits at once: each consumer's own and the channel's, whichever is reached first.
func Test02c_PerConsumerAndGlobalPrefetchHoldTogether(t *testing.T) {
	begin(t)
	c := dial(t)
	// Each consumer's 1 is reached before the channel's 3.
	ch := c.channel()
	q := exclusiveQueue(t, ch, "-1", nil)
	if err := ch.Qos(1, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(3, 0, true); err != nil {
		t.Fatal(err)
	}
	first := consume(t, ch, q, "first", false, false, nil)
	second := consume(t, ch, q, "second", false, false, nil)
	publish(t, c, q, bodies("1", "2", "3", "4", "5")...)
	receive(t, first, "the first consumer's 1")
	receive(t, second, "the second consumer's 1")
	if n := ready(t, ch, q); n != 3 {
		t.Errorf("prefetch 1 per consumer under a global 3: two consumers hold 2 of 5, %d ready, want 3", n)
	}
	// The channel's 3 is reached before each consumer's 2.
	ch2 := c.channel()
	q2 := exclusiveQueue(t, ch2, "-2", nil)
	if err := ch2.Qos(2, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := ch2.Qos(3, 0, true); err != nil {
		t.Fatal(err)
	}
	first = consume(t, ch2, q2, "first", false, false, nil)
	second = consume(t, ch2, q2, "second", false, false, nil)
	publish(t, c, q2, bodies("1", "2", "3", "4", "5", "6", "7", "8")...)
	held := []int{0, 0}
	for i := 0; i < 3; i++ {
		which, _ := receiveAny(t, first, second)
		held[which]++
	}
	if n := ready(t, ch2, q2); n != 5 {
		t.Errorf("a global 3 over prefetch 2 per consumer: two consumers hold 3 of 8, %d ready, want 5", n)
	}
	if held[0] > 2 || held[1] > 2 {
		t.Errorf("a consumer holds more than its prefetch of 2: %v", held)
	}
}

// 2d. A global basic.qos after basic.consume limits that consumer at once.
func Test02d_GlobalQosReachesConsumersThatExist(t *testing.T) {
	begin(t)
	c := dial(t)
	ch := c.channel()
	q := exclusiveQueue(t, ch, "", nil)
	deliveries := consume(t, ch, q, "unlimited-so-far", false, false, nil)
	if err := ch.Qos(1, 0, true); err != nil {
		t.Fatal(err)
	}
	publish(t, c, q, bodies("1", "2", "3")...)
	d := receive(t, deliveries, "the first delivery")
	if n := ready(t, ch, q); n != 2 {
		t.Fatalf("a global prefetch of 1 set after the consumer holds it to 1 of 3: %d ready, want 2", n)
	}
	if err := d.Ack(false); err != nil {
		t.Fatal(err)
	}
	receive(t, deliveries, "the delivery after the ack")
	if n := ready(t, ch, q); n != 1 {
		t.Errorf("after one ack, 2 of 3 delivered: %d ready, want 1", n)
	}
}

// 3. A channel.close of the client's that crosses the broker's channel.close (here a 404 for a publish to a missing
// exchange, which the client has not read yet when it closes) is answered, and the connection stays open.
func Test03_CrossingChannelCloseKeepsTheConnection(t *testing.T) {
	begin(t)
	c := dial(t)
	missing := name(t, "-missing")
	// Every channel is opened first, the one for the last round trip too: amqp091-go reuses a channel's number as
	// soon as Close returns, which is before the broker's close-ok when the closes cross (and before amqp091-go's
	// own close-ok when the broker's close came first), and either on a channel opened again is an error with any
	// broker.
	channels := make([]*amqp.Channel, 20)
	for i := range channels {
		channels[i] = c.channel()
	}
	last := c.channel()
	for _, ch := range channels {
		if err := ch.Publish(missing, "k", false, false, body("m")); err != nil {
			t.Fatalf("basic.publish after %d crossing closes: %v", c.tap.crossings(), err)
		}
		// When the closes cross, amqp091-go sends its close-ok for the broker's close before Close returns.
		_ = ch.Close()
	}
	if c.tap.crossings() == 0 {
		t.Fatalf("no channel.close crossed the broker's in 20 tries: nothing was tested%s", c.tap)
	}
	// A round trip after the last close-ok: a broker that took it for a frame on a closed channel (504) has
	// ended the connection by now.
	if err := c.roundTripOn(last); err != nil {
		t.Fatalf("after %d crossing closes the connection is unusable: %v%s", c.tap.crossings(), err, c.tap)
	}
}

// 4. A message whose expiration passed while it waited is not delivered to a consumer.
func Test04_ExpiredMessagesAreNotDelivered(t *testing.T) {
	begin(t)
	c := dial(t)
	ch := c.channel()
	q := exclusiveQueue(t, ch, "", nil)
	publish(t, c, q, body("lasting"), amqp.Publishing{Body: []byte("short"), Expiration: "1"}, body("last"))
	// "short" expires 1 ms after it was queued: time for that to have passed (not a verdict: what is delivered
	// below decides, by its order).
	time.Sleep(50 * time.Millisecond)
	deliveries := consume(t, ch, q, "", true, false, nil)
	for _, want := range []string{"lasting", "last"} {
		if got := string(receive(t, deliveries, want).Body); got != want {
			t.Fatalf("delivered %q, want %q (the expired message is not delivered)", got, want)
		}
	}
}

// 5. x-max-length holds when a nacked message is requeued: the requeued message goes back to the head, and the
// head is dropped.
func Test05_MaxLengthHoldsForRequeuedMessages(t *testing.T) {
	begin(t)
	c := dial(t)
	ch := c.channel()
	q := exclusiveQueue(t, ch, "", amqp.Table{"x-max-length": int32(2)})
	publish(t, c, q, bodies("a", "b")...)
	a := get(t, ch, q, false)
	publish(t, c, q, body("c")) // b and c ready: the queue is at its length again
	if err := ch.Nack(a.DeliveryTag, false, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"b", "c"} {
		if got := string(get(t, ch, q, true).Body); got != want {
			t.Fatalf("got %q, want %q: the requeued head is dropped past x-max-length 2", got, want)
		}
	}
	if _, ok, err := ch.Get(q, true); ok || err != nil {
		t.Errorf("a third message: ok=%v err=%v", ok, err)
	}
}

// 6. x-queue-type classic on a redeclare equals no x-queue-type, both ways.
func Test06_ClassicQueueTypeEqualsNoTypeOnRedeclare(t *testing.T) {
	begin(t)
	c := dial(t)
	ch := c.channel()
	plain := exclusiveQueue(t, ch, "-plain", nil)
	if _, err := ch.QueueDeclare(plain, false, false, true, false, amqp.Table{"x-queue-type": "classic"}); err != nil {
		t.Fatalf("redeclare with x-queue-type classic: %v", err)
	}
	classic := exclusiveQueue(t, ch, "-classic", amqp.Table{"x-queue-type": "classic"})
	if _, err := ch.QueueDeclare(classic, false, false, true, false, nil); err != nil {
		t.Fatalf("redeclare without x-queue-type: %v", err)
	}
	// A redeclare still compares the other arguments.
	if code := refusal(t, c, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(plain, false, false, true, false, amqp.Table{"x-max-length": int32(5)})
		return err
	}); code != amqp.PreconditionFailed {
		t.Errorf("a redeclare with another x-max-length: %d, want 406", code)
	}
}

// 7. The default exchange cannot be deleted or unbound from, nor can an amq.* exchange be deleted: 403.
func Test07_DefaultExchangeUnbindAndDeleteAre403(t *testing.T) {
	begin(t)
	c := dial(t)
	q := exclusiveQueue(t, c.channel(), "", nil)
	for what, call := range map[string]func(ch *amqp.Channel) error{
		"exchange.delete of the default exchange": func(ch *amqp.Channel) error {
			return ch.ExchangeDelete("", false, false)
		},
		"exchange.delete of amq.direct": func(ch *amqp.Channel) error {
			return ch.ExchangeDelete("amq.direct", false, false)
		},
		"queue.unbind from the default exchange": func(ch *amqp.Channel) error { return ch.QueueUnbind(q, q, "", nil) },
	} {
		if code := refusal(t, c, call); code != amqp.AccessRefused {
			t.Errorf("%s: %d, want 403", what, code)
		}
	}
}

// 8. A consumer of a queue that is consumed exclusively, or an exclusive consumer of a queue with consumers: 403.
func Test08_ConsumerOfAnExclusivelyConsumedQueueIs403(t *testing.T) {
	begin(t)
	c := dial(t)
	ch := c.channel()
	q := exclusiveQueue(t, ch, "", nil)
	consume(t, ch, q, "only", false, true, nil)
	if code := refusal(t, c, func(ch *amqp.Channel) error {
		_, err := ch.Consume(q, "second", false, false, false, false, nil)
		return err
	}); code != amqp.AccessRefused {
		t.Errorf("a second consumer of an exclusively consumed queue: %d, want 403", code)
	}
	shared := exclusiveQueue(t, ch, "-shared", nil)
	consume(t, ch, shared, "first", false, false, nil)
	if code := refusal(t, c, func(ch *amqp.Channel) error {
		_, err := ch.Consume(shared, "exclusive", false, true, false, false, nil)
		return err
	}); code != amqp.AccessRefused {
		t.Errorf("an exclusive consumer of a queue with a consumer: %d, want 403", code)
	}
}

// 9. An empty queue name means the queue the channel declared last; before any declare it is 404.
func Test09_EmptyQueueNameIsTheLastDeclaredQueue(t *testing.T) {
	begin(t)
	c := dial(t)
	ch := c.channel()
	declared, err := ch.QueueDeclare("", false, false, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	// queue.bind with an empty queue and an empty key: that queue, with its name as the key.
	if err := ch.QueueBind("", "", "amq.direct", false, nil); err != nil {
		t.Fatalf("queue.bind of the last declared queue: %v", err)
	}
	publishVia(t, c, "amq.direct", declared.Name, body("through amq.direct"), body("purged"))
	if got := string(get(t, ch, "", true).Body); got != "through amq.direct" {
		t.Fatalf("basic.get of \"\": %q", got)
	}
	if n, err := ch.QueuePurge("", false); err != nil || n != 1 {
		t.Fatalf("queue.purge of \"\": %d, %v; want 1", n, err)
	}
	deliveries := consume(t, ch, "", "", true, false, nil)
	publish(t, c, declared.Name, body("consumed"))
	if got := string(receive(t, deliveries, "basic.consume of \"\"").Body); got != "consumed" {
		t.Fatalf("basic.consume of \"\": %q", got)
	}
	if code := refusal(t, c, func(ch *amqp.Channel) error {
		_, _, err := ch.Get("", true)
		return err
	}); code != amqp.NotFound {
		t.Errorf("basic.get of \"\" before any queue.declare: %d, want 404", code)
	}
}

// 10. In a transaction, an ack of a delivery tag the channel never gave is refused at once (406), not at commit.
func Test10_UnknownTagAckInATransactionIs406AtOnce(t *testing.T) {
	begin(t)
	c := dial(t)
	if code := refusal(t, c, func(ch *amqp.Channel) error {
		if err := ch.Tx(); err != nil {
			return err
		}
		return ch.Ack(99, false) // and no tx.commit
	}); code != amqp.PreconditionFailed {
		t.Errorf("ack of an unknown tag in tx mode: %d, want 406", code)
	}
}

// 11. Without confirms, a publish to a full reject-publish queue is dropped silently; channel and connection stay.
func Test11_FullRejectPublishQueueDropsSilently(t *testing.T) {
	begin(t)
	c := dial(t)
	ch := c.channel()
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	q := exclusiveQueue(t, ch, "", amqp.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"})
	for _, b := range []string{"kept", "dropped"} {
		if err := ch.Publish("", q, false, false, body(b)); err != nil {
			t.Fatal(err)
		}
	}
	// The same channel's next round trips (basic.get, which RabbitMQ too orders after the publishes): a refusal of
	// the second publish would have closed the channel first.
	if got := string(get(t, ch, q, true).Body); got != "kept" {
		t.Fatalf("got %q, want the first message", got)
	}
	if d, ok, err := ch.Get(q, true); ok || err != nil {
		t.Fatalf("a second message (%q) or an error (%v): the publish past x-max-length is dropped", d.Body, err)
	}
	select {
	case err := <-closed:
		t.Fatalf("the channel was closed: %v", err)
	default:
	}
}

// 12. In confirm mode a publish to a missing exchange closes the channel with 404; it is not nacked.
func Test12_ConfirmModePublishToMissingExchangeCloses404(t *testing.T) {
	begin(t)
	c := dial(t)
	ch := c.channel()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 1))
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	if err := ch.Publish(name(t, "-missing"), "k", false, false, body("m")); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(deadline)
	for {
		select {
		case confirm, ok := <-confirms:
			if ok {
				t.Fatalf("the publish was answered with ack=%v, not channel.close 404", confirm.Ack)
			}
			confirms = nil // closed with the channel: wait for the close's code
		case err := <-closed:
			if err == nil || err.Code != amqp.NotFound {
				t.Fatalf("the channel closed with %v, want 404", err)
			}
			if c.conn.IsClosed() {
				t.Fatal("the connection was closed too")
			}
			return
		case <-timeout:
			t.Fatalf("neither channel.close nor a confirm within %v", deadline)
		}
	}
}

// 13. In a transaction, a publish to a missing exchange is 404 at once, before any tx.commit.
func Test13_TransactionalPublishToMissingExchangeIs404AtOnce(t *testing.T) {
	begin(t)
	c := dial(t)
	missing := name(t, "-missing")
	if code := refusal(t, c, func(ch *amqp.Channel) error {
		if err := ch.Tx(); err != nil {
			return err
		}
		return ch.Publish(missing, "k", false, false, body("m")) // and no tx.commit
	}); code != amqp.NotFound {
		t.Errorf("publish to a missing exchange in tx mode: %d, want 404", code)
	}
}

// 14a. Requeued messages go back to their original positions.
func Test14a_RequeuedMessagesKeepTheirPosition(t *testing.T) {
	begin(t)
	c := dial(t)
	ch := c.channel()
	q := exclusiveQueue(t, ch, "", nil)
	publish(t, c, q, bodies("m1", "m2", "m3", "m4")...)
	m1, m2, m3 := get(t, ch, q, false), get(t, ch, q, false), get(t, ch, q, false)
	for _, requeue := range []amqp.Delivery{m3, m1, m2} { // in another order than they were queued
		if err := ch.Nack(requeue.DeliveryTag, false, true); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"m1", "m2", "m3", "m4"} {
		d := get(t, ch, q, true)
		if string(d.Body) != want {
			t.Fatalf("got %q, want %q: requeued messages go back where they were", d.Body, want)
		}
		if d.Redelivered != (want != "m4") {
			t.Errorf("%s: redelivered=%v", want, d.Redelivered)
		}
	}
}

// 14b. In a priority queue, requeued messages go back by their priority, ahead of those of theirs still queued.
func Test14b_RequeuedMessagesGoBackByPriority(t *testing.T) {
	begin(t)
	c := dial(t)
	ch := c.channel()
	q := exclusiveQueue(t, ch, "", amqp.Table{"x-max-priority": int32(5)})
	publish(t, c, q, amqp.Publishing{Body: []byte("low-1")}, amqp.Publishing{Body: []byte("low-2")},
		amqp.Publishing{Body: []byte("high"), Priority: 3})
	high, low1 := get(t, ch, q, false), get(t, ch, q, false)
	if string(high.Body) != "high" || string(low1.Body) != "low-1" {
		t.Fatalf("by priority first: %q, %q", high.Body, low1.Body)
	}
	for _, requeue := range []amqp.Delivery{low1, high} {
		if err := ch.Nack(requeue.DeliveryTag, false, true); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"high", "low-1", "low-2"} {
		if got := string(get(t, ch, q, true).Body); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

// 15. An exclusive consumer of a single-active-consumer queue is 403.
func Test15_ExclusiveConsumeOnSingleActiveConsumerQueueIs403(t *testing.T) {
	begin(t)
	c := dial(t)
	q := exclusiveQueue(t, c.channel(), "", amqp.Table{"x-single-active-consumer": true})
	if code := refusal(t, c, func(ch *amqp.Channel) error {
		_, err := ch.Consume(q, "exclusive", false, true, false, false, nil)
		return err
	}); code != amqp.AccessRefused {
		t.Errorf("exclusive basic.consume on a single-active-consumer queue: %d, want 403", code)
	}
}

// 16. x-death's original-expiration is the publisher's expiration string, its time a timestamp.
func Test16_XDeathOriginalExpirationIsAString(t *testing.T) {
	begin(t)
	c := dial(t)
	ch := c.channel()
	dead := exclusiveQueue(t, ch, "-dead", nil)
	q := exclusiveQueue(t, ch, "", amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dead})
	deliveries := consume(t, ch, dead, "", true, false, nil)
	publish(t, c, q, amqp.Publishing{Body: []byte("short"), Expiration: "20"})
	d := receive(t, deliveries, "the dead-lettered message")
	deaths, ok := d.Headers["x-death"].([]interface{})
	if !ok || len(deaths) != 1 {
		t.Fatalf("x-death: %s", describe(d.Headers["x-death"]))
	}
	death, ok := deaths[0].(amqp.Table)
	if !ok {
		t.Fatalf("x-death[0]: %s", describe(deaths[0]))
	}
	if got := describe(death["original-expiration"]); got != describe("20") {
		t.Errorf("original-expiration: %s, want the string 20", got)
	}
	if _, ok := death["time"].(time.Time); !ok {
		t.Errorf("time: %s, want a timestamp", describe(death["time"]))
	}
	if death["reason"] != "expired" || death["queue"] != q {
		t.Errorf("reason, queue: %s", describe(death))
	}
	if d.Expiration != "" {
		t.Errorf("the dead-lettered message keeps expiration %q", d.Expiration)
	}
}

// E1. connection.update-secret is answered update-secret-ok; the connection goes on.
func TestE1_UpdateSecret(t *testing.T) {
	begin(t)
	c := dial(t)
	u, err := url.Parse(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	password, _ := u.User.Password()
	for _, secret := range []string{password, "not-the-password"} {
		if err := c.conn.UpdateSecret(secret, "refresh"); err != nil {
			t.Fatalf("update-secret %q: %v", secret, err)
		}
		if _, err := c.channel().QueueDeclare("", false, false, true, false, nil); err != nil {
			t.Fatalf("after update-secret %q: %v", secret, err)
		}
	}
}

// E2. A wrong password is refused at login, which amqp091-go reports as ErrCredentials. amqp091-go does not
// announce authentication_failure_close (RabbitMQ then only closes the socket); a connection.close the broker
// sends all the same must say 403. The broker announces the capability.
func TestE2_WrongPasswordIsAnAuthenticationFailure(t *testing.T) {
	begin(t)
	c := dial(t)
	if caps, _ := c.conn.Properties["capabilities"].(amqp.Table); caps["authentication_failure_close"] != true {
		t.Errorf("server capabilities: %s", describe(caps))
	}
	u, err := url.Parse(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "wrong-password")
	var wire *tap
	_, err = amqp.DialConfig(u.String(), amqp.Config{Dial: func(network, addr string) (net.Conn, error) {
		raw, err := net.DialTimeout(network, addr, deadline)
		wire = &tap{Conn: raw}
		return wire, err
	}})
	if !errors.Is(err, amqp.ErrCredentials) {
		t.Fatalf("dial with a wrong password: %v, want ErrCredentials", err)
	}
	for _, e := range wire.snapshot() {
		if e.fromServer && e.class == 10 && e.method != 10 && e.method != 50 {
			t.Errorf("the broker went on with the handshake: method 10.%d", e.method)
		}
		if e.fromServer && e.class == 10 && e.method == 50 && e.code != amqp.AccessRefused {
			t.Errorf("connection.close %d, want 403", e.code)
		}
	}
}

// E3. Sender-selected distribution: CC and BCC are routing keys too; BCC is not delivered.
func TestE3_CCAndBCCHeaders(t *testing.T) {
	begin(t)
	c := dial(t)
	ch := c.channel()
	exchange := name(t, "-x")
	if err := ch.ExchangeDeclare(exchange, "direct", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ch, err := c.conn.Channel(); err == nil {
			_ = ch.ExchangeDelete(exchange, false, false)
		}
	})
	queues := map[string]string{}
	for _, key := range []string{"to", "cc", "bcc", "other"} {
		queues[key] = exclusiveQueue(t, ch, "-"+key, nil)
		if err := ch.QueueBind(queues[key], key, exchange, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	publishVia(t, c, exchange, "to", amqp.Publishing{Body: []byte("m"),
		Headers: amqp.Table{"CC": []interface{}{"cc"}, "BCC": []interface{}{"bcc", "to"}}})
	for _, key := range []string{"to", "cc", "bcc"} {
		d := get(t, ch, queues[key], true)
		if _, ok := d.Headers["BCC"]; ok {
			t.Errorf("%s: BCC was delivered: %s", key, describe(d.Headers))
		}
		if describe(d.Headers["CC"]) != describe([]interface{}{"cc"}) {
			t.Errorf("%s: CC is %s", key, describe(d.Headers["CC"]))
		}
		if n := ready(t, ch, queues[key]); n != 0 {
			t.Errorf("%s got the message %d more times", key, n)
		}
	}
	if n := ready(t, ch, queues["other"]); n != 0 {
		t.Errorf("a queue no key routes to got %d", n)
	}
	// Through the default exchange each key names a queue.
	publish(t, c, queues["to"], amqp.Publishing{Body: []byte("d"), Headers: amqp.Table{"CC": []interface{}{queues["cc"]}}})
	for _, key := range []string{"to", "cc"} {
		if got := string(get(t, ch, queues[key], true).Body); got != "d" {
			t.Errorf("%s: %q", key, got)
		}
	}
}

// E4. Direct reply-to: a request published with reply_to amq.rabbitmq.reply-to carries a name of its own, and a
// reply published to that name reaches the requester's amq.rabbitmq.reply-to consumer.
func TestE4_DirectReplyTo(t *testing.T) {
	begin(t)
	requester := dial(t)
	service := dial(t)
	q := sharedQueue(t, service, "-requests", nil)
	requests := consume(t, service.channel(), q, "", true, false, nil)
	ch := requester.channel()
	replies := consume(t, ch, "amq.rabbitmq.reply-to", "", true, false, nil)
	if err := ch.Publish("", q, false, false, amqp.Publishing{Body: []byte("ping"), CorrelationId: "c1",
		ReplyTo: "amq.rabbitmq.reply-to"}); err != nil {
		t.Fatal(err)
	}
	request := receive(t, requests, "the request")
	if !strings.HasPrefix(request.ReplyTo, "amq.rabbitmq.reply-to.") {
		t.Fatalf("reply_to: %q", request.ReplyTo)
	}
	if err := service.channel().Publish("", request.ReplyTo, false, false, amqp.Publishing{Body: []byte("pong"),
		CorrelationId: request.CorrelationId}); err != nil {
		t.Fatal(err)
	}
	reply := receive(t, replies, "the reply")
	if string(reply.Body) != "pong" || reply.CorrelationId != "c1" {
		t.Errorf("reply: %q, correlation id %q", reply.Body, reply.CorrelationId)
	}
}

// E5. Consumer priorities: the x-priority 10 consumer gets every message while it has room; the x-priority 1 one
// gets what it has no room for.
func TestE5_ConsumerPriorities(t *testing.T) {
	begin(t)
	c := dial(t)
	ch := c.channel()
	q := exclusiveQueue(t, ch, "", nil)
	if err := ch.Qos(3, 0, false); err != nil {
		t.Fatal(err)
	}
	low := consume(t, ch, q, "low", false, false, amqp.Table{"x-priority": int32(1)})
	high := consume(t, ch, q, "high", false, false, amqp.Table{"x-priority": int32(10)})
	publish(t, c, q, bodies("1", "2", "3")...)
	for _, want := range []string{"1", "2", "3"} {
		if got := string(receive(t, high, "the higher priority consumer").Body); got != want {
			t.Fatalf("high got %q, want %q", got, want)
		}
	}
	// All three went to the higher one; it is full now.
	publish(t, c, q, body("4"))
	if got := string(receive(t, low, "the lower priority consumer").Body); got != "4" {
		t.Errorf("low got %q", got)
	}
}
