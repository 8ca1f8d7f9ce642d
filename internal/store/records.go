package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/proto"
)

// DeliveryRecord is a delivery:{id} record: the stored bytes and their
// parsed form. Raw is what a compare-and-set compares against.
type DeliveryRecord struct {
	Raw []byte
	*proto.Delivery
}

// SubscriptionRecord is a webhook:{id} record: the stored bytes and their
// parsed form.
type SubscriptionRecord struct {
	Raw []byte
	*proto.Subscription
}

// Delivery reads delivery:{id}. It returns an error wrapping ErrNotFound when
// the key is absent, a *CorruptError when the record cannot be read or is
// over MaxDeliveryRecord, and any other error (wrapping the Redis error)
// when Redis could not be asked.
func (s *Store) Delivery(ctx context.Context, id string) (*DeliveryRecord, error) {
	key := DeliveryKey(id)
	raw, err := readRecord(s.gets(ctx, key)[0], key)
	return deliveryRecord(key, raw, err)
}

// deliveryRecord checks and parses a delivery record as read (raw, err).
func deliveryRecord(key string, raw []byte, err error) (*DeliveryRecord, error) {
	if err != nil {
		return nil, err
	}
	if err := checkSize(key, raw, MaxDeliveryRecord); err != nil {
		return nil, err
	}
	d, err := proto.ParseDelivery(raw)
	if err != nil {
		return nil, &CorruptError{Key: key, Err: err, Raw: raw}
	}
	return &DeliveryRecord{Raw: raw, Delivery: d}, nil
}

// Bundle is everything one attempt of a delivery needs besides the delivery
// itself. A missing or unreadable record is reported per field, so the
// engine can fail that one delivery and keep going.
type Bundle struct {
	// EventRaw is event:{event_id} as stored; Event its parsed form.
	EventRaw []byte
	Event    *proto.Event
	// EventErr is nil, an error wrapping ErrNotFound, or a *CorruptError
	// (also for a record over MaxEventRecord).
	EventErr error

	// SubscriptionRaw is webhook:{subscription_id} as stored.
	SubscriptionRaw []byte
	// Subscription may be shared with other bundles: read it, never modify it.
	Subscription *proto.Subscription
	// SubscriptionErr is nil, an error wrapping ErrNotFound, or a *CorruptError
	// (also for a record over MaxSubscriptionRecord).
	SubscriptionErr error

	// Secret is webhook:secret:{subscription_id} exactly as stored, still
	// "enc:…" when encrypted. HasSecret is false only when the key is absent.
	Secret    string
	HasSecret bool

	// Settings are jetrelay's own settings of the subscription
	// (jetrelay:subscription:{id}); all defaults when it has none.
	// SettingsErr is nil or a *CorruptError.
	Settings    *proto.SubscriptionSettings
	SettingsErr error
}

// Load fetches the event, subscription, secret and jetrelay settings of d in
// one round trip.
// Its error is non-nil only when Redis could not answer (down, timeout) or
// when the secret key holds something other than a string: a secret that
// exists but cannot be read must stop the send (fail closed) rather than
// look absent and let the delivery go out unsigned.
func (s *Store) Load(ctx context.Context, d *proto.Delivery) (*Bundle, error) {
	if d == nil {
		return nil, errors.New("store: load: nil delivery")
	}
	keys := bundleKeys(d.EventID, d.SubscriptionID)
	// The settings record is optional and absent for most subscriptions: it
	// must not cost the second look a missing record gets.
	vals, errs := s.read(ctx, 3, keys[:]...)
	return s.bundle(keys, vals, errs)
}

// Prefetched is what Load would answer, read ahead with the delivery
// (DeliveryAndLoad) and parsed only when asked for.
type Prefetched struct {
	s    *Store
	keys [4]string
	vals [][]byte
	errs []error
}

// Bundle returns what Load(ctx, d) would have returned for the delivery
// read with it.
func (p *Prefetched) Bundle() (*Bundle, error) { return p.s.bundle(p.keys, p.vals, p.errs) }

// DeliveryAndLoad reads delivery:{id} and, in the same MGET, the records
// Load reads for a delivery of eventID and subscriptionID (the ids a work
// item's headers name): one round trip where Delivery then Load take two,
// one after the other. rec and err are as Delivery's. pre is nil when
// either id is empty or when the record names other ids than the ones
// given: the caller then calls Load, so a wrong hint costs a round trip,
// never a wrong read.
func (s *Store) DeliveryAndLoad(ctx context.Context, id, eventID, subscriptionID string) (rec *DeliveryRecord, pre *Prefetched, err error) {
	if eventID == "" || subscriptionID == "" {
		rec, err = s.Delivery(ctx, id)
		return rec, nil, err
	}
	key := DeliveryKey(id)
	bk := bundleKeys(eventID, subscriptionID)
	vals, errs := s.read(ctx, 4, key, bk[0], bk[1], bk[2], bk[3])
	if rec, err = deliveryRecord(key, vals[0], errs[0]); err != nil {
		return nil, nil, err
	}
	if rec.EventID != eventID || rec.SubscriptionID != subscriptionID {
		return rec, nil, nil
	}
	return rec, &Prefetched{s: s, keys: bk, vals: vals[1:], errs: errs[1:]}, nil
}

// bundleKeys are the keys Load reads, in the order bundle takes them.
func bundleKeys(eventID, subscriptionID string) [4]string {
	return [4]string{EventKey(eventID), SubscriptionKey(subscriptionID), SecretKey(subscriptionID), SettingsKey(subscriptionID)}
}

// bundle makes Load's answer of what read returned for keys (bundleKeys).
func (s *Store) bundle(keys [4]string, vals [][]byte, errs []error) (*Bundle, error) {
	eventKey, subKey, settingsKey := keys[0], keys[1], keys[3]
	b := &Bundle{}
	var err error
	if b.EventRaw, b.EventErr = vals[0], errs[0]; isInfra(b.EventErr) {
		return nil, b.EventErr
	}
	if b.SubscriptionRaw, b.SubscriptionErr = vals[1], errs[1]; isInfra(b.SubscriptionErr) {
		return nil, b.SubscriptionErr
	}
	secret, secretErr := vals[2], errs[2]
	switch {
	case secretErr == nil:
		b.Secret, b.HasSecret = string(secret), true
	case !errors.Is(secretErr, ErrNotFound):
		return nil, secretErr
	}
	b.Settings = &proto.SubscriptionSettings{}
	switch settingsErr := errs[3]; {
	case settingsErr == nil:
		if set, err := parseSettings(settingsKey, vals[3]); err != nil {
			b.SettingsErr = err
		} else {
			b.Settings = set
		}
	case isInfra(settingsErr):
		return nil, settingsErr
	}

	if b.EventErr == nil {
		b.EventErr = checkSize(eventKey, b.EventRaw, MaxEventRecord)
	}
	if b.EventErr == nil {
		if b.Event, err = proto.ParseEvent(b.EventRaw); err != nil {
			b.EventErr = &CorruptError{Key: eventKey, Err: err}
		}
	}
	if b.SubscriptionErr == nil {
		b.SubscriptionErr = checkSize(subKey, b.SubscriptionRaw, MaxSubscriptionRecord)
	}
	if b.SubscriptionErr == nil {
		if b.Subscription, err = s.subs.parse(subKey, b.SubscriptionRaw); err != nil {
			b.SubscriptionErr = &CorruptError{Key: subKey, Err: err}
		}
	}
	return b, nil
}

// replyBytes is the bytes of a string in an MGET reply, without copying
// them. go-redis reads each bulk string into a slice of its own, made for
// that reply (proto.Reader.readStringReply: make, io.ReadFull, then an
// unsafe view as a string), and nothing else holds it once read has taken
// the value out of the reply: the slice is the caller's, as a copy would
// be. The copy cost 2.3 KiB of allocation and a memmove per delivery (the
// delivery, event, subscription and secret records of each work item).
// TestRead_RecordBytesAreTheCallers pins that the bytes are the caller's.
func replyBytes(str string) []byte {
	if str == "" {
		return []byte{}
	}
	return unsafe.Slice(unsafe.StringData(str), len(str))
}

// read reads string keys with one MGET: a single command, which an
// autopipeliner batches with other workers' commands without holding its
// flush for more from this caller. MGET answers nil both for a missing key
// and for a key of another type, so only those keys are read again with GET
// (a second round trip only when something is missing) to tell ErrNotFound
// from a *CorruptError. Keys from index optional on are jetrelay's own
// optional records: nil there means absent (ErrNotFound) without a second
// look. errs[i] is nil, one of those, or the Redis error.
func (s *Store) read(ctx context.Context, optional int, keys ...string) ([][]byte, []error) {
	vals := make([][]byte, len(keys))
	errs := make([]error, len(keys))
	var cmd *redis.SliceCmd
	if s.hot != nil {
		cmd = s.hot.MGet(ctx, keys...)
	} else {
		cmd = s.rdb.MGet(ctx, keys...)
	}
	res, err := cmd.Result()
	if err == nil && len(res) != len(keys) {
		err = fmt.Errorf("MGET of %d keys answered %d values", len(keys), len(res))
	}
	if err != nil {
		err = fmt.Errorf("store: read %s: %w", strconv.Quote(keys[0]), err)
		for i := range errs {
			errs[i] = err
		}
		return vals, errs
	}
	var again []int
	for i, v := range res {
		switch str, ok := v.(string); {
		case ok:
			vals[i] = replyBytes(str)
		case i >= optional:
			errs[i] = fmt.Errorf("%s: %w", strconv.Quote(keys[i]), ErrNotFound)
		default:
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return vals, errs
	}
	missing := make([]string, len(again))
	for j, i := range again {
		missing[j] = keys[i]
	}
	for j, c := range s.gets(ctx, missing...) {
		i := again[j]
		vals[i], errs[i] = readRecord(c, keys[i])
	}
	return vals, errs
}

// readRecord turns one pipelined GET into bytes or a classified error.
func readRecord(cmd *redis.StringCmd, key string) ([]byte, error) {
	raw, err := cmd.Bytes()
	return raw, classifyGet(key, err)
}

// isInfra reports whether err means Redis could not be asked, as opposed to
// a record that is missing or unreadable.
func isInfra(err error) bool {
	return err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrCorrupt)
}

// Subscription reads webhook:{id}, with the errors Delivery has (ErrNotFound,
// *CorruptError, or the Redis error).
func (s *Store) Subscription(ctx context.Context, id string) (*SubscriptionRecord, error) {
	key := SubscriptionKey(id)
	raw, err := readRecord(s.gets(ctx, key)[0], key)
	if err != nil {
		return nil, err
	}
	if err := checkSize(key, raw, MaxSubscriptionRecord); err != nil {
		return nil, err
	}
	sub, err := s.subs.parse(key, raw)
	if err != nil {
		return nil, &CorruptError{Key: key, Err: err, Raw: raw}
	}
	return &SubscriptionRecord{Raw: raw, Subscription: sub}, nil
}
