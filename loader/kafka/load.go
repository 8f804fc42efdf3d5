package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// Destination is where a Loader writes: the ClickHouse sink, which the
// direct path uses too, so both paths make the same tables.
type Destination interface {
	loader.Sink
	loader.Evolver
	// DropTable drops a table if it exists (a table renamed away).
	DropTable(ctx context.Context, name string) error
	// Capabilities are the server's, for schema.Map.
	Capabilities() schema.Capabilities
	// KeyVersion returns the version of the latest row stored for the key
	// of vals (indexed like tm.Columns); found is false when there is none.
	KeyVersion(ctx context.Context, tm *schema.TableMap, vals []any) (version uint64, found bool, err error)
}

// LoadConfig says what a Loader consumes. The zero value of every field but
// Client.Brokers means its default.
type LoadConfig struct {
	Client
	// Group is the consumer group; loaders of one group share the
	// partitions. Default "ferry-loader".
	Group string
	// CatchUp makes Run return nil once every message that was on the
	// table topics when it started is loaded (by any member of the group).
	// Default false: consume until ctx is done.
	CatchUp bool
	// Batch bounds the rows held before a write, as for the replicator.
	// Defaults 50000 rows, 32 MiB, 300ms.
	MaxRows  int
	MaxBytes int
	MaxAge   time.Duration
	// Rescan is how often the loader looks for new table topics. Default 10s.
	Rescan time.Duration
	// RetryFor is how long Run retries lost connections (to Kafka or to
	// the destination) before it gives up with the last error, counted
	// from the first failure since the loader last ran a minute without
	// one. A Kafka not reached since the start is not retried. Default 0:
	// for ever; with CatchUp 5 minutes. ferry load --retry-for.
	RetryFor time.Duration
	// Retryable tells the destination's transient errors
	// (clickhouse.IsRetryable). Default nil: only connection errors.
	Retryable func(error) bool
	// FetchMaxBytes is the most a fetch asks the broker for. Default
	// 16 MiB; keep it at least the publisher's BatchBytes (brokers send a
	// larger batch anyway, alone, since KIP-74). ferry load
	// --kafka-fetch-max-bytes.
	FetchMaxBytes int
	// Shapes are, by "schema.table", the layouts of the ClickHouse tables
	// the loader makes (schema.Shape). Default ferry's own.
	Shapes map[string]schema.Shape
}

// newTable is a table's topic as this loader maps it: for its
// destination, in the shape its configuration gives.
func (l *Loader) newTable(src schema.Table) (*table, error) {
	t, err := newTable(l.cfg.TopicPrefix, src, l.dest.Capabilities())
	if err != nil {
		return nil, err
	}
	name := src.Schema + "." + src.Name
	if sh, ok := l.cfg.Shapes[name]; ok {
		tm := *t.tm // not the wire mapping's, which may be the same
		if err := tm.SetShape(sh, "table-shapes: "+name); err != nil {
			return nil, err
		}
		t.tm = &tm
	}
	return t, nil
}

// Loader consumes the table topics of a prefix and writes their rows to a
// Destination. Offsets are committed only after the rows they cover are
// written (Destination.Write returned nil), so a crash at any point loses
// nothing: the rows since the last commit are read and written again, and
// versions make that harmless.
type Loader struct {
	cfg     LoadConfig
	dest    Destination
	log     *zap.Logger
	schemas map[string]schema.Table // by schema id
	tables  map[string]*loadTable   // by topic; nil: none (see current)
	batch   *loader.Batcher
	pending []kafkago.Message      // read, not yet committed
	read    map[string]int         // messages read per "topic/partition" in this session
	store   loader.TableStateStore // where truncations and descriptions are recorded; nil: in memory only
	cuts    map[string]*cut        // by topic, nil for none; missing: not read yet
	// committed counts the messages whose offsets this session committed.
	committed int
	// parked are the partitions held back until a key change's carrier is
	// there, by "topic/partition"; carriers, the carriers queued (see
	// keychange.go).
	parked   map[string]*parking
	carriers map[string]bool
	// storedLast: the last parked partition was resumed by a carrier
	// another loader stored. carrierSince: when the batch got its first
	// carrier; zero when it has none.
	storedLast   bool
	carrierSince time.Time
	// admin asks the brokers for metadata and offsets: one client, so its
	// transport's connections are reused (caughtUp asks twice a second).
	admin *kafkago.Client
	// connected: the brokers answered once since the start, so a failure
	// is an outage, not a wrong address (see runRetrying).
	connected bool
}

// NewLoader returns a Loader writing to dest.
func NewLoader(cfg LoadConfig, dest Destination) (*Loader, error) {
	var err error
	if cfg.Client, err = cfg.Client.withDefaults(); err != nil {
		return nil, err
	}
	if cfg.Group == "" {
		cfg.Group = "ferry-loader"
	}
	if cfg.MaxRows <= 0 {
		cfg.MaxRows = 50000
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 32 << 20
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 300 * time.Millisecond
	}
	if cfg.Rescan <= 0 {
		cfg.Rescan = 10 * time.Second
	}
	if cfg.FetchMaxBytes <= 0 {
		cfg.FetchMaxBytes = defaultFetchMaxBytes
	}
	if cfg.RetryFor <= 0 && cfg.CatchUp {
		cfg.RetryFor = defaultCatchUpRetry
	}
	store, _ := dest.(loader.TableStateStore)
	return &Loader{cfg: cfg, dest: dest, log: cfg.Logger, schemas: map[string]schema.Table{}, store: store, cuts: map[string]*cut{},
		carriers: map[string]bool{}, admin: cfg.admin(),
		tables: map[string]*loadTable{}, batch: loader.NewBatcher(dest, cfg.MaxRows, cfg.MaxBytes, cfg.MaxAge)}, nil
}

// errRescan ends one consumer session when the set of topics changed.
var errRescan = errors.New("table topics changed")

// Run consumes until ctx is done (after writing and committing what it
// read) or, with CatchUp, until the start's end offsets are loaded. Lost
// connections are retried for RetryFor (see runRetrying).
func (l *Loader) Run(ctx context.Context) error {
	defer l.closeAdmin()
	return l.runRetrying(ctx)
}

func (l *Loader) run(ctx context.Context) error {
	for {
		topics, err := l.tableTopics(ctx)
		if err != nil {
			return err
		}
		if len(topics) == 0 {
			if l.cfg.CatchUp {
				l.log.Info("no table topics: nothing to load", zap.String("prefix", l.cfg.TopicPrefix))
				return nil
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(l.cfg.Rescan):
				continue
			}
		}
		var ends map[string][]partitionEnd
		if l.cfg.CatchUp {
			if ends, err = l.endOffsets(ctx, topics); err != nil {
				return err
			}
		}
		err = l.session(ctx, topics, ends)
		var stalledSince time.Time
		for errors.Is(err, errStalled) { // the same topics, up to the same ends
			// Progress is what a session committed: a session that only
			// read parked partitions again, to hold them back again, made
			// none.
			if stalledSince.IsZero() || l.committed > 0 {
				stalledSince = time.Now().Add(-stallRejoin)
			}
			if limit := l.cfg.RetryFor; limit > 0 && time.Since(stalledSince) >= limit {
				return fmt.Errorf("kafka: catching up, group %s read nothing for %s while behind (--retry-for sets how long): "+
					"check that this host reaches the brokers at the addresses they advertise (advertised.listeners) "+
					"and what the group's other members do (kafka-consumer-groups.sh --describe --group %s)",
					l.cfg.Group, time.Since(stalledSince).Round(time.Second), l.cfg.Group)
			}
			err = l.session(ctx, topics, ends)
		}
		if !errors.Is(err, errRescan) {
			return err
		}
	}
}

// errStalled ends a catch-up session that read nothing for stallRejoin
// while its partitions are behind: the next session joins the group anew.
var errStalled = errors.New("catch-up stalled")

// stallRejoin is how long a catch-up session may read nothing while not
// caught up. Seen in TestLoaderProcessKilled: after SIGKILLs of other
// members, a restarted loader read two of four partitions and then
// nothing for nine minutes, its group never rebalanced. Parked partitions
// do not make it wait longer: in TestLoaderProcessKilledKeyChanges the
// same loader held its two partitions back for five minutes, waiting for
// carriers on the two it had not been given.
const stallRejoin = 30 * time.Second

// session consumes topics with one group membership.
func (l *Loader) session(ctx context.Context, topics []string, ends map[string][]partitionEnd) error {
	l.log.Info("consuming", zap.String("group", l.cfg.Group), zap.Strings("topics", topics), zap.Bool("catch_up", l.cfg.CatchUp))
	r := kafkago.NewReader(kafkago.ReaderConfig{
		Brokers: l.cfg.Brokers, GroupID: l.cfg.Group, GroupTopics: topics, Dialer: l.cfg.dialer(),
		StartOffset: kafkago.FirstOffset, MaxWait: 250 * time.Millisecond, MaxBytes: l.cfg.FetchMaxBytes,
		CommitInterval:    0, // commit synchronously, only what was written
		HeartbeatInterval: time.Second, SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second,
		JoinGroupBackoff: 500 * time.Millisecond,
		// kafka-go is silent by default: a member failing to join its
		// group would look like a loader with nothing to do.
		ErrorLogger: kafkago.LoggerFunc(l.readerError),
	})
	defer r.Close()
	l.read, l.committed = map[string]int{}, 0
	l.parked = map[string]*parking{} // what a session held back is read again by the next
	defer func() {
		l.log.Info("consumer session ended", zap.String("group", l.cfg.Group), zap.Any("messages_by_partition", l.read))
	}()
	err := l.consume(ctx, r, topics, ends)
	if err != nil && ctx.Err() != nil {
		// The stop cut a write or a commit short (a cancelled insert
		// closes its connection): what was read whole is still pending,
		// and finalFlush writes it again.
		l.log.Info("stopping", zap.NamedError("interrupted", err))
		return l.finalFlush(r)
	}
	return err
}

// readerError logs what kafka-go's reader reports. It retries a fetch
// whose read timed out, which with a short MaxWait is routine.
func (l *Loader) readerError(msg string, args ...any) {
	text := fmt.Sprintf(msg, args...)
	if strings.HasSuffix(text, "i/o timeout") {
		l.log.Debug("kafka reader: "+text, zap.String("group", l.cfg.Group))
		return
	}
	l.log.Warn("kafka reader: "+text, zap.String("group", l.cfg.Group))
}

// progressEvery is how often a consumer session logs what it read.
const progressEvery = 30 * time.Second

// consume reads, writes and commits until ctx is done, an error, the
// catch-up's end, or a change of the topics (errRescan).
func (l *Loader) consume(ctx context.Context, r *kafkago.Reader, topics []string, ends map[string][]partitionEnd) error {
	rescan, report := time.Now().Add(l.cfg.Rescan), time.Now().Add(progressEvery)
	lastRead := time.Now()
	for {
		if time.Now().After(report) {
			// A busy loader and a stuck one would otherwise log alike.
			report = time.Now().Add(progressEvery)
			l.log.Info("consuming: progress", zap.String("group", l.cfg.Group), zap.Any("messages_by_partition", l.read),
				zap.Int("parked_partitions", len(l.parked)))
		}
		if ends != nil && l.batch.Len() == 0 {
			done, err := l.caughtUp(ctx, ends)
			if err != nil || done {
				return err
			}
			// With partitions parked, a rejoin reads what they held back
			// again: nothing of theirs is committed, nothing is lost.
			if time.Since(lastRead) > stallRejoin {
				l.log.Warn("catching up, but nothing read for a while: joining the group again",
					zap.String("group", l.cfg.Group), zap.Duration("idle", time.Since(lastRead)), zap.Any("messages_by_partition", l.read),
					zap.Int("parked_partitions", len(l.parked)))
				return errors.Join(l.flush(ctx, r), errStalled)
			}
		}
		wait := 500 * time.Millisecond
		if d := l.batch.Deadline(); !d.IsZero() {
			wait = max(time.Until(d), time.Millisecond)
		}
		if len(l.parked) > 0 || !l.carrierSince.IsZero() {
			wait = min(wait, carrierFlush) // see keychange.go
		}
		fctx, cancel := context.WithTimeout(ctx, wait)
		m, err := r.FetchMessage(fctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return l.finalFlush(r)
		case errors.Is(err, context.DeadlineExceeded):
		case err != nil:
			return fmt.Errorf("kafka: read: %w", err)
		default:
			lastRead = time.Now()
			l.read[fmt.Sprintf("%s/%d", m.Topic, m.Partition)]++
			if err := l.handle(ctx, r, m); err != nil {
				return fmt.Errorf("kafka: %s partition %d offset %d: %w", m.Topic, m.Partition, m.Offset, err)
			}
		}
		if err := l.resume(ctx, r); err != nil {
			return err
		}
		if err := l.flushIfDue(ctx, r); err != nil {
			return err
		}
		// Checked busy or idle: a renamed table's new topic must not wait
		// for a quiet moment.
		if ends == nil && time.Now().After(rescan) {
			rescan = time.Now().Add(l.cfg.Rescan)
			if changed, err := l.topicsChanged(ctx, topics); err != nil || changed {
				return errors.Join(l.flush(ctx, r), err, errRescan)
			}
		}
	}
}

// flushIfDue writes the batch when it is full or old enough. Messages that
// bring no row (tombstones, rows dropped by a truncation) are committed as
// soon as no row waits before them.
func (l *Loader) flushIfDue(ctx context.Context, r *kafkago.Reader) error {
	if l.batch.Full() || l.batch.Due(time.Now()) || l.carriersDue() {
		return l.flush(ctx, r)
	}
	if l.batch.Len() == 0 {
		return l.commit(ctx, r)
	}
	return nil
}

// flush writes every pending row, then commits the offsets of every
// message read: only now are they in ClickHouse.
func (l *Loader) flush(ctx context.Context, r *kafkago.Reader) error {
	if err := l.batch.Flush(ctx); err != nil {
		return err
	}
	l.carrierSince = time.Time{}
	return l.commit(ctx, r)
}

func (l *Loader) commit(ctx context.Context, r *kafkago.Reader) error {
	if len(l.pending) == 0 {
		return nil
	}
	if err := r.CommitMessages(ctx, l.pending...); err != nil {
		return fmt.Errorf("kafka: commit offsets of group %s: %w", l.cfg.Group, err)
	}
	l.committed += len(l.pending)
	l.pending = l.pending[:0]
	return nil
}

// finalFlush writes and commits what was read before a shutdown.
func (l *Loader) finalFlush(r *kafkago.Reader) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.flush(ctx, r); err != nil {
		l.log.Warn("final write failed; the rows since the last commit are read again on the next start", zap.Error(err))
	}
	return nil
}

// tableTopics lists the prefix's table topics.
func (l *Loader) tableTopics(ctx context.Context) ([]string, error) {
	md, err := l.admin.Metadata(ctx, &kafkago.MetadataRequest{})
	if err != nil {
		return nil, l.cfg.explainUnreachable(fmt.Errorf("kafka: list topics on %v: %w", l.cfg.Brokers, err))
	}
	l.connected = true
	var topics []string
	for _, t := range md.Topics {
		if strings.HasPrefix(t.Name, l.cfg.TopicPrefix+".") && t.Name != l.cfg.StateTopic() && t.Name != l.cfg.SchemaTopic() {
			topics = append(topics, t.Name)
		}
	}
	slices.Sort(topics)
	return topics, nil
}

func (l *Loader) topicsChanged(ctx context.Context, topics []string) (bool, error) {
	now, err := l.tableTopics(ctx)
	return err == nil && !slices.Equal(now, topics), err
}

// partitionEnd is a partition's next offset when catching up began.
type partitionEnd struct {
	partition int
	first     int64
	last      int64
}

func (l *Loader) endOffsets(ctx context.Context, topics []string) (map[string][]partitionEnd, error) {
	admin := l.admin
	md, err := admin.Metadata(ctx, &kafkago.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, fmt.Errorf("kafka: read partitions: %w", err)
	}
	req := &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{}}
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			req.Topics[t.Name] = append(req.Topics[t.Name], kafkago.FirstOffsetOf(p.ID), kafkago.LastOffsetOf(p.ID))
		}
	}
	res, err := admin.ListOffsets(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("kafka: read end offsets: %w", err)
	}
	ends := map[string][]partitionEnd{}
	for topic, ps := range res.Topics {
		for _, p := range ps {
			if p.Error != nil {
				return nil, fmt.Errorf("kafka: end offset of %s partition %d: %w", topic, p.Partition, p.Error)
			}
			ends[topic] = append(ends[topic], partitionEnd{partition: p.Partition, first: p.FirstOffset, last: p.LastOffset})
		}
	}
	return ends, nil
}

// caughtUp reports whether the group committed every partition up to its
// end offset at the start.
func (l *Loader) caughtUp(ctx context.Context, ends map[string][]partitionEnd) (bool, error) {
	req := &kafkago.OffsetFetchRequest{GroupID: l.cfg.Group, Topics: map[string][]int{}}
	for topic, ps := range ends {
		for _, p := range ps {
			if p.last > p.first {
				req.Topics[topic] = append(req.Topics[topic], p.partition)
			}
		}
	}
	if len(req.Topics) == 0 {
		return true, nil
	}
	res, err := l.admin.OffsetFetch(ctx, req)
	if err != nil {
		return false, fmt.Errorf("kafka: read the group's offsets: %w", err)
	}
	committed := map[string]map[int]int64{}
	for topic, ps := range res.Topics {
		committed[topic] = map[int]int64{}
		for _, p := range ps {
			committed[topic][p.Partition] = p.CommittedOffset
		}
	}
	for topic, ps := range ends {
		for _, p := range ps {
			if c, ok := committed[topic][p.partition]; p.last > p.first && (!ok || c < p.last) {
				return false, nil
			}
		}
	}
	l.log.Info("caught up", zap.String("group", l.cfg.Group))
	return true, nil
}

// closeAdmin closes the admin client's idle broker connections.
func (l *Loader) closeAdmin() { closeClient(l.admin) }
