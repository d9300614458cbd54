// Package amqpgo holds, in its tests, the AMQP 0-9-1 listener's test with the Go client RabbitMQ maintains
// (github.com/rabbitmq/amqp091-go, Debian's golang-github-rabbitmq-amqp091-go-dev): one test per channel semantic
// RabbitMQ's clients rely on and per RabbitMQ extension the broker implements (docs/spec-notes.md, "AMQP 0-9-1"),
// against a broker process it starts, or against any broker given by URL (RabbitMQ too).
//
// Built offline in GOPATH mode, as the Go example driver, into build/reference-broker/amqp-go/amqp_go.test
// (reference-broker/CMakeLists.txt), and run as
//
//	amqp_go.test -test.v -broker build/reference-broker/firemq-broker
//	amqp_go.test -test.v -url amqp://guest:guest@127.0.0.1:5672/
//	amqp_go.test -test.v -broker firemq-broker -broker-arg=--amqp-fault=global-qos-per-consumer
//
// It ends with a line "amqp_go: N passed, M failed".
package amqpgo
