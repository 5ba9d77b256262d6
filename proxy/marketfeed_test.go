package proxy_test

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/buffer"
	"github.com/tetherproxy/tether/internal/labels"
	"github.com/tetherproxy/tether/internal/protocol"
	"github.com/tetherproxy/tether/proxy"
)

// The recipes of docs/sequences.md, each against a scripted upstream that
// speaks the exchange's documented format: faults on a live connection (an
// event dropped, repeated, reordered), then reconnects after which the feed
// continues from its current id without replaying what it published
// meanwhile. The app must see no false gap on folded ranges, every real gap
// as a notice, nothing twice, nothing stale, and per-connection counters
// and new epochs must keep flowing.

// feedGapTimeout is the recipes' TETHER_GAP_TIMEOUT: how long a gap on a
// live connection waits for a reordered message.
const feedGapTimeout = 300 * time.Millisecond

// feedNotice is the recipes' TETHER_GAP_NOTICE.
const feedNotice = `{"t":"gap","stream":{{json .Stream}},"from":{{.From}},"to":{{.To}},"reset":{{json .Reset}}}`

func feedGap(stream string, from, to int64, reset string) string {
	return fmt.Sprintf(`{"t":"gap","stream":%q,"from":%d,"to":%d,"reset":%q}`, stream, from, to, reset)
}

// feedConn is what one upstream connection sends, and what the app must
// have got once it did, before the connection is reset (all but the last).
type feedConn struct {
	send []string
	want []string
}

// runFeed plays conns against tether configured with the sequence fields
// of r and the model and scope of seq under the notify policy, and checks
// the app's messages and the session's gap counts.
func runFeed(t *testing.T, r protocol.Rules, seq proxy.Sequences, conns []feedConn, wantGaps map[string]uint64) {
	t.Helper()
	up := newUpstream(t, upstreamConfig{})
	seq.GapTimeout = feedGapTimeout
	seq.GapPolicy = proxy.GapNotify
	seq.GapNotice = mustGapNotice(t, feedNotice)
	env := newTether(t, up.srv.URL(), func(o *proxy.Options) { o.Rules, o.Sequences = r, seq })
	a := dialApp(t, env.url, appOptions{})
	for i, fc := range conns {
		c := up.nextConn(t)
		for _, m := range fc.send {
			if err := c.Send(m); err != nil {
				t.Fatalf("connection %d: send %s: %v", i+1, m, err)
			}
		}
		for _, want := range fc.want {
			m := a.next(t)
			if m.op != ws.OpText || string(m.data) != want {
				t.Fatalf("connection %d: app got %q, want %q", i+1, m.data, want)
			}
		}
		if i < len(conns)-1 {
			_ = c.Reset()
		}
	}
	st := env.srv.Status()
	if len(st.Sessions) != 1 {
		t.Fatalf("%d sessions, want 1", len(st.Sessions))
	}
	if got := st.Sessions[0].Gaps; !maps.Equal(got, wantGaps) {
		t.Errorf("gaps %v, want %v", got, wantGaps)
	}
}

// binanceSpot is a Binance spot diff. depth event for the update ids U..u.
func binanceSpot(first, last int64) string {
	return fmt.Sprintf(`{"e":"depthUpdate","E":1672515782136,"s":"BNBBTC","U":%d,"u":%d,"b":[["0.0024","10"]],"a":[["0.0026","100"]]}`, first, last)
}

// Binance spot depth under TETHER_SEQ_MODEL=range: events folding several
// updates flow without a gap; a repeated event is dropped; a dropped one is
// a gap announced after the timeout; a reordered one is put back; after a
// reconnect that lost updates, the gap is announced at once.
func TestRecipeBinanceSpotDepth(t *testing.T) {
	r := protocol.Rules{SeqPath: mustPath(t, "u"), SeqFirstPath: mustPath(t, "U"), StreamPath: mustPath(t, "s")}
	seq := proxy.Sequences{SeqModel: buffer.ModelRange}
	runFeed(t, r, seq, []feedConn{
		{
			send: []string{binanceSpot(1, 3), binanceSpot(4, 4), binanceSpot(5, 9), binanceSpot(5, 9), binanceSpot(2, 8),
				binanceSpot(12, 14), binanceSpot(15, 15), binanceSpot(18, 19), binanceSpot(16, 17)},
			want: []string{binanceSpot(1, 3), binanceSpot(4, 4), binanceSpot(5, 9), feedGap("BNBBTC", 10, 11, ""),
				binanceSpot(12, 14), binanceSpot(15, 15), binanceSpot(16, 17), binanceSpot(18, 19)},
		},
		{
			send: []string{binanceSpot(23, 25), binanceSpot(26, 27)},
			want: []string{feedGap("BNBBTC", 20, 22, ""), binanceSpot(23, 25), binanceSpot(26, 27)},
		},
	}, map[string]uint64{labels.GapNotified: 2})
}

// binanceFutures is a Binance USDⓈ-M futures depth event: U..u, and pu,
// the previous event's u.
func binanceFutures(first, last, prev int64) string {
	return fmt.Sprintf(`{"e":"depthUpdate","E":1591270260907,"T":1591270260891,"s":"BTCUSDT","U":%d,"u":%d,"pu":%d,"b":[["7403.89","0.002"]],"a":[["7405.96","3.340"]]}`,
		first, last, prev)
}

// Binance futures depth under TETHER_SEQ_MODEL=chain (pu is the previous
// u): ids need not be consecutive; a broken link is a gap.
func TestRecipeBinanceFuturesDepth(t *testing.T) {
	r := protocol.Rules{SeqPath: mustPath(t, "u"), SeqPrevPath: mustPath(t, "pu"), StreamPath: mustPath(t, "s")}
	seq := proxy.Sequences{SeqModel: buffer.ModelChain}
	runFeed(t, r, seq, []feedConn{
		{
			send: []string{binanceFutures(100, 105, 99), binanceFutures(106, 110, 105), binanceFutures(106, 110, 105),
				binanceFutures(131, 140, 130), binanceFutures(111, 130, 110), binanceFutures(146, 150, 145), binanceFutures(151, 152, 150)},
			want: []string{binanceFutures(100, 105, 99), binanceFutures(106, 110, 105), binanceFutures(111, 130, 110),
				binanceFutures(131, 140, 130), feedGap("BTCUSDT", 141, 145, ""), binanceFutures(146, 150, 145), binanceFutures(151, 152, 150)},
		},
		{
			send: []string{binanceFutures(161, 170, 160), binanceFutures(171, 171, 170)},
			want: []string{feedGap("BTCUSDT", 153, 160, ""), binanceFutures(161, 170, 160), binanceFutures(171, 171, 170)},
		},
	}, map[string]uint64{labels.GapNotified: 2, labels.GapFilled: 1})
}

// deribitBook is a Deribit book.{instrument}.raw notification: a snapshot
// (prev < 0: no prev_change_id) or a change.
func deribitBook(typ string, id, prev int64) string {
	p := ""
	if prev >= 0 {
		p = fmt.Sprintf(`"prev_change_id":%d,`, prev)
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"subscription","params":{"channel":"book.BTC-PERPETUAL.raw","data":{"type":%q,"timestamp":1554373962454,%s"instrument_name":"BTC-PERPETUAL","change_id":%d,"bids":[["new",5042.34,30]],"asks":[]}}}`,
		typ, p, id)
}

// Deribit's book under TETHER_SEQ_MODEL=chain: a repeated change is
// dropped, a reordered one put back, a dropped one announced; on a new
// connection the re-subscription's snapshot (no prev_change_id) restarts
// the chain: no false gap.
func TestRecipeDeribitBook(t *testing.T) {
	r := protocol.Rules{SeqPath: mustPath(t, "params.data.change_id"),
		SeqPrevPath: mustPath(t, "params.data.prev_change_id"), StreamPath: mustPath(t, "params.channel")}
	seq := proxy.Sequences{SeqModel: buffer.ModelChain}
	const ch = "book.BTC-PERPETUAL.raw"
	runFeed(t, r, seq, []feedConn{
		{
			send: []string{deribitBook("snapshot", 1000, -1), deribitBook("change", 1003, 1000), deribitBook("change", 1003, 1000),
				deribitBook("change", 1012, 1009), deribitBook("change", 1009, 1003), deribitBook("change", 1030, 1020),
				deribitBook("change", 1031, 1030)},
			want: []string{deribitBook("snapshot", 1000, -1), deribitBook("change", 1003, 1000), deribitBook("change", 1009, 1003),
				deribitBook("change", 1012, 1009), feedGap(ch, 1013, 1020, ""), deribitBook("change", 1030, 1020),
				deribitBook("change", 1031, 1030)},
		},
		{
			send: []string{deribitBook("snapshot", 1100, -1), deribitBook("change", 1104, 1100)},
			want: []string{deribitBook("snapshot", 1100, -1), deribitBook("change", 1104, 1100)},
		},
	}, map[string]uint64{labels.GapNotified: 1, labels.GapFilled: 1})
}

// coinbaseFull is a Coinbase Exchange full-channel message of product.
func coinbaseFull(typ, product string, seq int64) string {
	return fmt.Sprintf(`{"type":%q,"time":"2014-11-07T08:19:27.028459Z","product_id":%q,"sequence":%d,"order_id":"d50ec984-77a8-460a-b958-66f114b0de9b","size":"1.34","price":"502.1","side":"buy","order_type":"limit"}`,
		typ, product, seq)
}

// Coinbase Exchange's full channel, TETHER_SEQ_MODEL=next per product_id:
// the sequence counts per product across the channel, so a subscriber to
// the full channel sees every number.
func TestRecipeCoinbaseExchangeFull(t *testing.T) {
	r := protocol.Rules{SeqPath: mustPath(t, "sequence"), StreamPath: mustPath(t, "product_id")}
	seq := proxy.Sequences{}
	runFeed(t, r, seq, []feedConn{
		{
			send: []string{coinbaseFull("received", "BTC-USD", 10), coinbaseFull("open", "BTC-USD", 11), coinbaseFull("received", "ETH-USD", 50),
				coinbaseFull("open", "BTC-USD", 11), coinbaseFull("done", "BTC-USD", 13), coinbaseFull("received", "BTC-USD", 12),
				coinbaseFull("match", "BTC-USD", 15), coinbaseFull("open", "ETH-USD", 51)},
			want: []string{coinbaseFull("received", "BTC-USD", 10), coinbaseFull("open", "BTC-USD", 11), coinbaseFull("received", "ETH-USD", 50),
				coinbaseFull("received", "BTC-USD", 12), coinbaseFull("done", "BTC-USD", 13), coinbaseFull("open", "ETH-USD", 51),
				feedGap("BTC-USD", 14, 14, ""), coinbaseFull("match", "BTC-USD", 15)},
		},
		{
			send: []string{coinbaseFull("received", "BTC-USD", 20), coinbaseFull("received", "ETH-USD", 52)},
			want: []string{feedGap("BTC-USD", 16, 19, ""), coinbaseFull("received", "BTC-USD", 20), coinbaseFull("received", "ETH-USD", 52)},
		},
	}, map[string]uint64{labels.GapNotified: 2, labels.GapFilled: 1})
}

// advancedTrade is a Coinbase Advanced Trade market-data message.
func advancedTrade(seq int64) string {
	return fmt.Sprintf(`{"channel":"l2_data","client_id":"","timestamp":"2023-02-09T20:32:50.714964855Z","sequence_num":%d,"events":[{"type":"update","product_id":"BTC-USD","updates":[{"side":"bid","event_time":"1970-01-01T00:00:00Z","price_level":"21921.73","new_quantity":"0.06317902"}]}]}`, seq)
}

// Coinbase Advanced Trade's sequence_num counts per connection from 0:
// under TETHER_SEQ_SCOPE=connection a repeat is dropped within a
// connection, and every new connection keeps flowing, with no reset.
func TestRecipeCoinbaseAdvancedTrade(t *testing.T) {
	r := protocol.Rules{SeqPath: mustPath(t, "sequence_num")}
	seq := proxy.Sequences{SeqScope: proxy.SeqScope(1)}
	runFeed(t, r, seq, []feedConn{
		{send: []string{advancedTrade(0), advancedTrade(1), advancedTrade(1), advancedTrade(2)},
			want: []string{advancedTrade(0), advancedTrade(1), advancedTrade(2)}},
		{send: []string{advancedTrade(0), advancedTrade(1), advancedTrade(0), advancedTrade(2)},
			want: []string{advancedTrade(0), advancedTrade(1), advancedTrade(2)}},
		{send: []string{advancedTrade(0), advancedTrade(1)},
			want: []string{advancedTrade(0), advancedTrade(1)}},
	}, map[string]uint64{})
}

// centrifugoSubscribed is Centrifugo's reply to a subscribe command (client
// protocol v2, JSON), with the channel's stream position.
func centrifugoSubscribed(epoch string, offset int64) string {
	return fmt.Sprintf(`{"id":1,"subscribe":{"recoverable":true,"epoch":%q,"offset":%d,"positioned":true}}`, epoch, offset)
}

// centrifugoPub is a publication pushed on channel news.
func centrifugoPub(offset int64) string {
	return fmt.Sprintf(`{"push":{"channel":"news","pub":{"data":{"input":"%d"},"offset":%d}}}`, offset, offset)
}

// Centrifugo's offsets within an epoch: after a broker restart the new
// connection's subscribe reply brings a new epoch, the offsets start over,
// and the app gets one reset notice, then the new epoch's publications.
func TestRecipeCentrifugo(t *testing.T) {
	r := protocol.Rules{SeqPath: mustPath(t, "push.pub.offset"), EpochPath: mustPath(t, "subscribe.epoch")}
	seq := proxy.Sequences{}
	runFeed(t, r, seq, []feedConn{
		{send: []string{centrifugoSubscribed("xyz", 0), centrifugoPub(1), centrifugoPub(2), centrifugoPub(2), centrifugoPub(3)},
			want: []string{centrifugoSubscribed("xyz", 0), centrifugoPub(1), centrifugoPub(2), centrifugoPub(3)}},
		{send: []string{centrifugoSubscribed("abc", 0), centrifugoPub(1), centrifugoPub(2)},
			want: []string{centrifugoSubscribed("abc", 0), feedGap("", 4, 0, "epoch"), centrifugoPub(1), centrifugoPub(2)}},
	}, map[string]uint64{labels.GapEpoch: 1})
}
