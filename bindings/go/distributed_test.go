package kiln_test

import (
	"sync"
	"testing"
	"time"

	"kiln.dev/kiln"
)

// Three ranks on goroutines (CPU devices): all_sum, all_gather and reduce_scatter against the
// sums computed here.
func TestGroupCollectivesOnGoroutines(t *testing.T) {
	const n = 3
	groups := must(kiln.LocalGroup(kiln.Device{}, kiln.Device{}, kiln.Device{}))
	values := func(r int) []float32 {
		v := make([]float32, 6)
		for i := range v {
			v[i] = float32(r+1) + float32(i)/8
		}
		return v
	}
	var wg sync.WaitGroup
	errs := make([]string, n)
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			g := groups[r]
			if rank, size := must(g.Rank()), must(g.Size()); rank != r || size != n {
				errs[r] = "rank and size"
				return
			}
			x := must(kiln.FromSlice(values(r), 6))
			sum := must(must(kiln.AllSum(x, g)).Float32s())
			gathered := must(must(kiln.AllGather(x, g, 0)).Float32s())
			part := must(must(kiln.ReduceScatter(x, g)).Float32s())
			for i := 0; i < 6; i++ {
				if sum[i] != values(0)[i]+values(1)[i]+values(2)[i] || gathered[r*6+i] != values(r)[i] {
					errs[r] = "all_sum or all_gather"
				}
			}
			for i := 0; i < 2; i++ {
				if part[i] != sum[2*r+i] {
					errs[r] = "reduce_scatter"
				}
			}
		}(r)
	}
	wg.Wait()
	for r, e := range errs {
		if e != "" {
			t.Errorf("rank %d: %s", r, e)
		}
	}
	one := must(kiln.FromSlice([]float32{1, 2}, 2))
	if v := must(must(kiln.AllSum(one, nil)).Float32s()); v[0] != 1 || v[1] != 2 {
		t.Fatalf("the group of one rank copies: %v", v)
	}
}

// A rank that aborts the group ends the other's wait in its all_sum with the reason.
func TestGroupAbortEndsTheWait(t *testing.T) {
	groups := must(kiln.LocalGroup(kiln.Device{}, kiln.Device{}))
	done := make(chan error)
	go func() {
		x := must(kiln.FromSlice([]float32{1, 2}, 2))
		_, err := must(kiln.AllSum(x, groups[0])).Float32s()
		done <- err
	}()
	time.Sleep(200 * time.Millisecond) // rank 0 is waiting by now
	if err := groups[1].Abort("rank 1 failed"); err != nil {
		t.Fatal(err)
	}
	wantError(t, <-done, "[all_sum] the group was aborted: rank 1 failed")
	_, err := kiln.LocalGroup(kiln.Device{Type: kiln.CUDA, Index: 99})
	wantError(t, err, "[distributed] no CUDA device 99")
}
