package regions_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/regions"
)

// delayed is an Exchange whose calls take latency (virtual time in a
// synctest bubble): a region far from the global store.
type delayed struct {
	regions.Exchange
	latency time.Duration
}

func (d delayed) wait(ctx context.Context) error {
	select {
	case <-time.After(d.latency):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d delayed) Publish(ctx context.Context, region string, u []regions.Usage) error {
	if err := d.wait(ctx); err != nil {
		return err
	}
	return d.Exchange.Publish(ctx, region, u)
}

func (d delayed) Others(ctx context.Context, region string, u []regions.Usage) error {
	if err := d.wait(ctx); err != nil {
		return err
	}
	return d.Exchange.Others(ctx, region, u)
}

// mostIn returns the most of the sorted instants ts that fall in one
// interval of length w (both ends included).
func mostIn(ts []time.Time, w time.Duration) int {
	most, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) > w {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

// TestPropertyOverAdmissionBound: R regions with random request rates,
// start times, sync periods, headrooms and cross-region latencies (each
// under half the read delay) share one daily quota of one key, in virtual
// time. However they interleave, the regions together admit at most
// limit − headroom + what all regions but one admit in any
// W = P + read delay + the read's latency (the package doc's bound).
func TestPropertyOverAdmissionBound(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		nRegions := rapid.IntRange(2, 3).Draw(rt, "regions")
		period := rapid.SampledFrom([]time.Duration{time.Second, 2 * time.Second, 5 * time.Second}).Draw(rt, "period")
		headroom := rapid.SampledFrom([]float64{0, 0.1, 0.25}).Draw(rt, "headroom")
		limit := rapid.Int64Range(20, 300).Draw(rt, "limit")
		readDelay := period / 4
		type plan struct {
			every   time.Duration
			start   time.Duration
			latency time.Duration
		}
		plans := make([]plan, nRegions)
		for i := range plans {
			plans[i] = plan{
				every:   rapid.SampledFrom([]time.Duration{25 * time.Millisecond, 60 * time.Millisecond, 200 * time.Millisecond, time.Second}).Draw(rt, "every"),
				start:   time.Duration(rapid.Int64Range(0, int64(3*period)).Draw(rt, "start")),
				latency: time.Duration(rapid.Int64Range(0, int64(readDelay/2)).Draw(rt, "latency")),
			}
		}
		const run = 12 * time.Second
		admitted := make([][]time.Time, nRegions)
		synctest.Test(t, func(t *testing.T) {
			x := new(regions.MemoryExchange)
			spec := store.Spec{Name: "daily", Algorithm: store.FixedWindow, Limit: limit, Window: 24 * time.Hour}
			var wg sync.WaitGroup
			for i, p := range plans {
				s, err := regions.New(string(rune('a'+i)), store.NewMemory(), delayed{x, p.latency},
					regions.WithPeriod(period), regions.WithHeadroom(headroom), regions.WithLogger(quiet))
				if err != nil {
					rt.Fatal(err)
				}
				id, err := s.Register(context.Background(), spec)
				if err != nil {
					rt.Fatal(err)
				}
				wg.Go(func() {
					defer s.Close()
					end := time.Now().Add(run)
					<-time.After(p.start)
					for time.Now().Before(end) {
						req := store.Request{Now: time.Now().UnixNano()}
						req.Add(id, "tenant", 1)
						var res store.Result
						if err := s.Decide(context.Background(), &req, &res); err != nil {
							rt.Error(err)
							return
						}
						if res.Allowed {
							admitted[i] = append(admitted[i], time.Now())
						}
						<-time.After(p.every)
					}
				})
			}
			wg.Wait()
		})
		var total int64
		w := period + readDelay
		for _, p := range plans {
			w = max(w, period+readDelay+p.latency)
		}
		most := make([]int64, nRegions)
		for i, ts := range admitted {
			total += int64(len(ts))
			slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
			most[i] = int64(mostIn(ts, w))
		}
		var excess int64 // what all regions but one admit in a W, the most
		for q := range most {
			var sum int64
			for s := range most {
				if s != q {
					sum += most[s]
				}
			}
			excess = max(excess, sum)
		}
		h := int64(headroom * float64(limit))
		if bound := limit - h + excess; total > bound {
			rt.Fatalf("%d admitted of a limit of %d: over the bound %d (headroom %d, excess %d, per region %v)", total, limit, bound, h, excess, most)
		}
		rt.Logf("%d admitted of %d (headroom %d, excess allowed %d)", total, limit, h, excess)
	})
}
