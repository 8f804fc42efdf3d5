// Package kafka is ferry's Kafka transport: a loader.Sink that publishes
// rows as Debezium-style JSON envelopes, one topic per table, and a Loader
// that consumes them into another Sink (the ClickHouse one).
//
// # Publishing
//
// Sink is handed rows converted with the wire capabilities
// (schema.Capabilities{}, see Sink.Capabilities), whose integer forms of
// dates, timestamps and booleans hold every PostgreSQL value, and encodes
// each value losslessly by its PostgreSQL type (the Values table of docs/KAFKA.md). Write
// returns once every in-sync broker has acknowledged every message of the
// batch (acks=all), so the replicator's acknowledged LSN never passes what
// Kafka holds. Each message names, in the ferry.schema header, the table
// description it follows; the descriptions are on <prefix>.schema-changes,
// published before the first row that refers to them. The snapshot and
// table states the replicator keeps to resume are on the compacted
// <prefix>.ferry-state topic.
//
// # Loading
//
// Loader is one member of a consumer group. It turns every envelope back
// into the loader.Row the publisher was handed, its values converted from
// PostgreSQL's text by the destination's own mapping (so the tables are the
// direct path's), creates or alters tables when a new description appears,
// and commits offsets only after the destination's Write returned nil.
// Versions are LSNs, so order across partitions does not matter; a
// truncation reaches every partition, and rows are dropped while their
// partition has not yet delivered the truncation already applied (which
// the loader records in the destination, so that a restart knows it).
// A lost connection to Kafka or to the destination is retried, each
// attempt from the committed offsets, for LoadConfig.RetryFor; brokers
// that never answered since the start are not retried.
//
// # Key changes
//
// An update that changes a row's key is published as the old key's delete
// (with HeaderNewKey) and the new key's row (with HeaderOldKey), on
// different partitions. When the new row has unchanged (TOASTed) values,
// which are the old key's, the delete lists them too (HeaderUnchanged), and
// the loader queues with it a carrier: a deleted row of the new key, one
// version below the change, that the ClickHouse sink stores with the old
// key's values, resolved there in the old key's order. The new row waits
// for its carrier, holding back its partition until the carrier is queued
// by this loader or stored by any loader of the group (keychange.go).
//
// # Schema changes
//
// In-place changes publish a new description, which the loader applies
// when the first row of it arrives; a row of an older description read
// later (its version is lower) is read into the newer table. The loader
// records each table's description in the destination too. A rebuild (the direct path's shadow
// copy and swap) publishes its copy onto the table's own topic after a
// truncation carrying the new description; the loader replaces its table
// there. A table rename ends the old topic with a drop marker and copies
// the table onto the new one.
package kafka
