package trigger

import (
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

func utc(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04:05", s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestNextTicks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		sched        pipeline.Schedule
		after, until string
		want         []string // UTC
	}{
		{"weekdays in Berlin, winter", pipeline.Schedule{Cron: "0 3 * * 1-5", Timezone: "Europe/Berlin"},
			"2026-11-20 12:00:00", "2026-11-25 12:00:00",
			[]string{"2026-11-23 02:00:00", "2026-11-24 02:00:00", "2026-11-25 02:00:00"}},
		{"daily in Berlin across the spring change", pipeline.Schedule{Cron: "0 3 * * *", Timezone: "Europe/Berlin"},
			"2026-03-27 12:00:00", "2026-03-30 12:00:00",
			[]string{"2026-03-28 02:00:00", "2026-03-29 01:00:00", "2026-03-30 01:00:00"}},
		{"after is exclusive, until inclusive", pipeline.Schedule{Cron: "0 * * * *"},
			"2026-01-01 10:00:00", "2026-01-01 12:00:00",
			[]string{"2026-01-01 11:00:00", "2026-01-01 12:00:00"}},
		{"descriptor", pipeline.Schedule{Cron: "@daily"},
			"2026-01-01 00:00:00", "2026-01-03 00:00:00",
			[]string{"2026-01-02 00:00:00", "2026-01-03 00:00:00"}},
		{"New York", pipeline.Schedule{Cron: "30 9 * * *", Timezone: "America/New_York"},
			"2026-07-01 00:00:00", "2026-07-01 23:59:00",
			[]string{"2026-07-01 13:30:00"}},
		{"nothing in range", pipeline.Schedule{Cron: "0 0 1 1 *"},
			"2026-02-01 00:00:00", "2026-12-31 00:00:00", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := NextTicks(tt.sched, utc(tt.after), utc(tt.until))
			if err != nil {
				t.Fatal(err)
			}
			var texts []string
			for _, tick := range got {
				if want := tt.sched.Timezone; want != "" && tick.Location().String() != want {
					t.Errorf("tick %s is in %s, want the schedule's zone %s", tick, tick.Location(), want)
				}
				texts = append(texts, tick.UTC().Format("2006-01-02 15:04:05"))
			}
			if strings.Join(texts, ",") != strings.Join(tt.want, ",") {
				t.Errorf("ticks = %q, want %q", texts, tt.want)
			}
		})
	}
}

func TestNextTicksIsBounded(t *testing.T) {
	t.Parallel()
	s := pipeline.Schedule{Cron: "* * * * *"}
	got, err := NextTicks(s, utc("2026-01-01 00:00:00"), utc("2027-01-01 00:00:00"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != MaxTicks {
		t.Fatalf("got %d ticks, want MaxTicks=%d", len(got), MaxTicks)
	}
	if last := got[len(got)-1]; !last.Equal(utc("2026-01-01 16:40:00")) {
		t.Errorf("last tick = %s, want the %dth minute", last, MaxTicks)
	}
}

func TestScheduleErrors(t *testing.T) {
	t.Parallel()
	for _, s := range []pipeline.Schedule{{Cron: "61 * * * *"}, {Cron: "@every 1m"}, {Cron: "@daily", Timezone: "Nowhere/Never"}} {
		if _, err := NextTicks(s, time.Now(), time.Now().Add(time.Hour)); err == nil || !strings.Contains(err.Error(), s.Cron) {
			t.Errorf("NextTicks(%+v) error = %v, want one naming the schedule", s, err)
		}
		if _, err := Due(s, time.Time{}, time.Time{}, time.Now()); err == nil || !strings.Contains(err.Error(), s.Cron) {
			t.Errorf("Due(%+v) error = %v, want one naming the schedule", s, err)
		}
	}
}

func TestDue(t *testing.T) {
	t.Parallel()
	hourly := pipeline.Schedule{Cron: "0 * * * *", Missed: pipeline.MissedSkip}
	hourlyRunOnce := pipeline.Schedule{Cron: "0 * * * *", Missed: pipeline.MissedRunOnce}
	minutely := pipeline.Schedule{Cron: "* * * * *", Missed: pipeline.MissedSkip}
	clustered := pipeline.Schedule{Cron: "* 3 * * *", Missed: pipeline.MissedRunOnce} // every minute of 03:xx
	tests := []struct {
		name        string
		sched       pipeline.Schedule
		last, now   string // "" for a zero lastFired
		fire        bool
		tick        string // "" for none
		missed      int
		next        string
		reasonParts []string
	}{
		{"new schedule, tick just passed", hourly, "", "2026-05-01 10:00:30", true, "2026-05-01 10:00:00", 0, "2026-05-01 11:00:00",
			[]string{"tick 2026-05-01 10:00 UTC is due"}},
		{"new schedule, tick long passed: missed nothing", hourlyRunOnce, "", "2026-05-01 10:30:00", false, "", 0, "2026-05-01 11:00:00",
			[]string{"no tick is due; the next is at 2026-05-01 11:00 UTC"}},
		{"tick on time", hourly, "2026-05-01 09:00:00", "2026-05-01 10:00:05", true, "2026-05-01 10:00:00", 0, "2026-05-01 11:00:00", nil},
		{"tick at the edge of the window", hourly, "2026-05-01 09:00:00", "2026-05-01 10:02:00", true, "2026-05-01 10:00:00", 0, "2026-05-01 11:00:00", nil},
		{"already fired", hourly, "2026-05-01 10:00:00", "2026-05-01 10:00:40", false, "", 0, "2026-05-01 11:00:00", []string{"no tick is due"}},
		{"downtime, skip", hourly, "2026-05-01 10:00:00", "2026-05-01 15:30:00", false, "2026-05-01 15:00:00", 5, "2026-05-01 16:00:00",
			[]string{"tick 2026-05-01 15:00 UTC was missed by 30m0s; missed: skip does not run it; 4 earlier ticks dropped"}},
		{"downtime, run_once", hourlyRunOnce, "2026-05-01 10:00:00", "2026-05-01 15:30:00", true, "2026-05-01 15:00:00", 4, "2026-05-01 16:00:00",
			[]string{"was missed by 30m0s; missed: run_once runs it now; 4 earlier ticks dropped"}},
		{"one missed tick, run_once", hourlyRunOnce, "2026-05-01 10:00:00", "2026-05-01 11:10:00", true, "2026-05-01 11:00:00", 0, "2026-05-01 12:00:00",
			[]string{"run_once runs it now"}},
		{"downtime ending just after a tick, skip", hourly, "2026-05-01 10:00:00", "2026-05-01 15:01:00", true, "2026-05-01 15:00:00", 4, "2026-05-01 16:00:00",
			[]string{"is due; 4 earlier ticks dropped"}},
		{"a year of minutes", minutely, "2025-05-01 10:00:00", "2026-05-01 10:00:30", true, "2026-05-01 10:00:00", MaxTicks - 1, "2026-05-01 10:01:00",
			[]string{"is due; at least 999 earlier ticks dropped"}},
		{"a backlog of clustered ticks", clustered, "2023-01-01 03:59:00", "2026-05-01 05:00:00", true, "2026-05-01 03:59:00", MaxTicks - 1, "2026-05-02 03:00:00",
			[]string{"missed by 1h1m0s; missed: run_once runs it now"}},
		{"a backlog of clustered ticks, now inside the cluster", clustered, "2023-01-01 03:59:00", "2026-05-01 03:30:10", true, "2026-05-01 03:30:00", MaxTicks - 1, "2026-05-01 03:31:00", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var last time.Time
			if tt.last != "" {
				last = utc(tt.last)
			}
			d, err := Due(tt.sched, last, time.Time{}, utc(tt.now))
			if err != nil {
				t.Fatal(err)
			}
			var wantTick time.Time
			if tt.tick != "" {
				wantTick = utc(tt.tick)
			}
			if d.Fire != tt.fire || !d.Tick.Equal(wantTick) || d.Missed != tt.missed || !d.Next.Equal(utc(tt.next)) {
				t.Errorf("Due = fire %v tick %s missed %d next %s (%s)\nwant fire %v tick %s missed %d next %s",
					d.Fire, d.Tick, d.Missed, d.Next, d.Reason, tt.fire, wantTick, tt.missed, utc(tt.next))
			}
			for _, part := range tt.reasonParts {
				if !strings.Contains(d.Reason, part) {
					t.Errorf("reason %q lacks %q", d.Reason, part)
				}
			}
			// Recording the tick settles it: asked again at the same moment, nothing is due.
			if !d.Tick.IsZero() {
				again, err := Due(tt.sched, d.Tick, time.Time{}, utc(tt.now))
				if err != nil {
					t.Fatal(err)
				}
				if again.Fire || !again.Tick.IsZero() {
					t.Errorf("after recording tick %s, Due again = %+v; want nothing due", d.Tick, again)
				}
			}
		})
	}
}

// TestDueSince: only ticks strictly after the schedule came to be are its own, whether it
// never fired or fired before it changed; an unknown (zero) time changes nothing.
func TestDueSince(t *testing.T) {
	t.Parallel()
	minutely := pipeline.Schedule{Cron: "* * * * *", Missed: pipeline.MissedSkip}
	hourlyRunOnce := pipeline.Schedule{Cron: "0 * * * *", Missed: pipeline.MissedRunOnce}
	tests := []struct {
		name             string
		sched            pipeline.Schedule
		last, since, now string // "" for zero
		fire             bool
		tick             string // "" for none
		missed           int
	}{
		{"made after the tick, within the window", minutely, "", "2026-05-01 07:10:32", "2026-05-01 07:10:35", false, "", 0},
		{"made at the tick", minutely, "", "2026-05-01 07:10:00", "2026-05-01 07:10:05", false, "", 0},
		{"made just before the tick", minutely, "", "2026-05-01 07:09:59", "2026-05-01 07:10:05", true, "2026-05-01 07:10:00", 0},
		{"the first tick after it", minutely, "", "2026-05-01 07:10:32", "2026-05-01 07:11:05", true, "2026-05-01 07:11:00", 0},
		// The window's earlier tick (07:09) is dropped, as for any schedule never fired.
		{"not known when it was made", minutely, "", "", "2026-05-01 07:10:35", true, "2026-05-01 07:10:00", 1},
		{"made long before: the window still bounds it", minutely, "", "2026-04-01 00:00:00", "2026-05-01 07:10:35", true, "2026-05-01 07:10:00", 1},
		{"made in the future", minutely, "", "2026-05-01 07:20:00", "2026-05-01 07:10:35", false, "", 0},
		// Fired at 08:00, changed at 09:30, every coordinator down from 09:45: the 10:00
		// tick is late and runs once; 09:00 came before the change and is not missed.
		{"changed after it last fired", hourlyRunOnce, "2026-05-01 08:00:00", "2026-05-01 09:30:00", "2026-05-01 10:30:00", true, "2026-05-01 10:00:00", 0},
		{"changed after every tick since it fired", hourlyRunOnce, "2026-05-01 08:00:00", "2026-05-01 10:30:00", "2026-05-01 10:45:00", false, "", 0},
	}
	at := func(s string) time.Time {
		if s == "" {
			return time.Time{}
		}
		return utc(s)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := Due(tt.sched, at(tt.last), at(tt.since), utc(tt.now))
			if err != nil {
				t.Fatal(err)
			}
			if d.Fire != tt.fire || !d.Tick.Equal(at(tt.tick)) || d.Missed != tt.missed {
				t.Errorf("Due = fire %v tick %s missed %d (%s); want fire %v tick %s missed %d",
					d.Fire, d.Tick, d.Missed, d.Reason, tt.fire, at(tt.tick), tt.missed)
			}
		})
	}
}

// TestDueTimeZone: ticks are read in the schedule's zone whatever zone now is given in.
func TestDueTimeZone(t *testing.T) {
	t.Parallel()
	s := pipeline.Schedule{Cron: "0 3 * * *", Timezone: "Asia/Tokyo", Missed: pipeline.MissedSkip}
	// 03:00 in Tokyo is 18:00 UTC the day before.
	d, err := Due(s, utc("2026-06-01 18:00:00"), time.Time{}, utc("2026-06-02 18:00:20"))
	if err != nil {
		t.Fatal(err)
	}
	if !d.Fire || !d.Tick.Equal(utc("2026-06-02 18:00:00")) || d.Tick.Location().String() != "Asia/Tokyo" {
		t.Errorf("Due = %+v, want the 03:00 Tokyo tick of 2026-06-03, in Tokyo time", d)
	}
	if !strings.Contains(d.Reason, "2026-06-03 03:00 JST") {
		t.Errorf("reason %q does not show the tick in the schedule's zone", d.Reason)
	}
}

// TestDueFiresEachTickOnce drives Due the way a scheduler loop would, every 7 seconds for
// three hours, recording each decided tick: every quarter-hour tick fires exactly once.
func TestDueFiresEachTickOnce(t *testing.T) {
	t.Parallel()
	s := pipeline.Schedule{Cron: "*/15 * * * *", Missed: pipeline.MissedSkip}
	start := utc("2026-05-01 09:59:00")
	var last time.Time
	fired := map[time.Time]int{}
	for now := start; now.Before(start.Add(3 * time.Hour)); now = now.Add(7 * time.Second) {
		d, err := Due(s, last, time.Time{}, now)
		if err != nil {
			t.Fatal(err)
		}
		if d.Fire {
			fired[d.Tick.UTC()]++
			if late := now.Sub(d.Tick); late < 0 || late > 7*time.Second {
				t.Errorf("tick %s fired at %s, %s late", d.Tick, now, late)
			}
		}
		if !d.Tick.IsZero() {
			last = d.Tick
		}
		if d.Missed != 0 {
			t.Errorf("at %s: %d ticks missed by a loop that never stopped", now, d.Missed)
		}
	}
	if len(fired) != 12 {
		t.Errorf("fired %d distinct ticks, want 12: %v", len(fired), fired)
	}
	for tick, n := range fired {
		if n != 1 || tick.Minute()%15 != 0 {
			t.Errorf("tick %s fired %d times", tick, n)
		}
	}
}
