package schema

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func utc(y int, m time.Month, d, hh, mm, ss, us int) time.Time {
	return time.Date(y, m, d, hh, mm, ss, us*1000, time.UTC)
}

func TestConvertTemporalModern(t *testing.T) {
	date := Column{TypeOID: 1082, NotNull: true}
	ts := Column{TypeOID: 1114, NotNull: true}
	tstz := Column{TypeOID: 1184, NotNull: true}
	tm := Column{TypeOID: 1083, NotNull: true}
	runConvertCases(t, CapabilitiesFor(24, 8), []convertCase{
		{name: "date", col: date, text: "2024-02-29", want: utc(2024, 2, 29, 0, 0, 0, 0)},
		{name: "date min", col: date, text: "1900-01-01", want: utc(1900, 1, 1, 0, 0, 0, 0)},
		{name: "date max", col: date, text: "2299-12-31", want: utc(2299, 12, 31, 0, 0, 0, 0)},
		{name: "date 1899", col: date, text: "1899-12-31", wantErr: `Date32 (1900-01-01 to 2299-12-31) can't hold "1899-12-31": value not representable; ` + textFix},
		{name: "date 2300", col: date, text: "2300-01-01", wantErr: textFix},
		{name: "date infinity", col: date, text: "infinity", wantErr: `Date32 can't hold "infinity": value not representable; ` + textFix},
		{name: "date -infinity", col: date, text: "-infinity", wantErr: textFix},
		{name: "date BC", col: date, text: "0044-03-15 BC", wantErr: textFix},
		{name: "date not leap", col: date, text: "2023-02-29", wantErr: "invalid date"},
		{name: "date garbage", col: date, text: "2024-1-02", wantErr: "invalid date"},
		{name: "timestamp", col: ts, text: "2024-01-02 03:04:05", want: utc(2024, 1, 2, 3, 4, 5, 0)},
		{name: "timestamp micros", col: ts, text: "2024-01-02 03:04:05.123456", want: utc(2024, 1, 2, 3, 4, 5, 123456)},
		{name: "timestamp short fraction", col: ts, text: "2024-01-02 03:04:05.5", want: utc(2024, 1, 2, 3, 4, 5, 500000)},
		{name: "timestamp min", col: ts, text: "1900-01-01 00:00:00", want: utc(1900, 1, 1, 0, 0, 0, 0)},
		{name: "timestamp max", col: ts, text: "2299-12-31 23:59:59.999999", want: utc(2299, 12, 31, 23, 59, 59, 999999)},
		{name: "timestamp 1899", col: ts, text: "1899-12-31 23:59:59.999999", wantErr: "DateTime64 (1900-01-01 to 2299-12-31) can't hold"},
		{name: "timestamp 2300", col: ts, text: "2300-01-01 00:00:00", wantErr: textFix},
		{name: "timestamp infinity", col: ts, text: "infinity", wantErr: `DateTime64 (1900-01-01 to 2299-12-31) can't hold "infinity": value not representable; ` + textFix},
		{name: "timestamp -infinity", col: ts, text: "-infinity", wantErr: textFix},
		{name: "timestamptz infinity", col: tstz, text: "infinity", wantErr: textFix},
		{name: "timestamp 7 fraction digits", col: ts, text: "2024-01-02 03:04:05.1234567", wantErr: "invalid timestamp"},
		{name: "timestamp hour 24", col: ts, text: "2024-01-02 24:00:00", wantErr: "invalid timestamp"},
		{name: "timestamptz utc", col: tstz, text: "2024-01-02 03:04:05.5+00", want: utc(2024, 1, 2, 3, 4, 5, 500000)},
		{name: "timestamptz +05:30", col: tstz, text: "2024-01-02 03:04:05+05:30", want: utc(2024, 1, 1, 21, 34, 5, 0)},
		{name: "timestamptz -08", col: tstz, text: "2024-01-02 03:04:05.000001-08", want: utc(2024, 1, 2, 11, 4, 5, 1)},
		{name: "timestamptz +05:30:15", col: tstz, text: "2024-01-02 03:04:05+05:30:15", want: utc(2024, 1, 1, 21, 33, 50, 0)},
		{name: "timestamptz bad offset", col: tstz, text: "2024-01-02 03:04:05+5", wantErr: "invalid timestamp"},
		{name: "timestamptz offset minutes 60", col: tstz, text: "2024-01-02 03:04:05+05:60", wantErr: "invalid timestamp"},
		{name: "timestamptz trailing junk", col: tstz, text: "2024-01-02 03:04:05+00 x", wantErr: "invalid timestamp"},
		{name: "time", col: tm, text: "13:14:15.000016", want: int64(47655000016)},
		{name: "time midnight", col: tm, text: "00:00:00", want: int64(0)},
		{name: "time 24:00:00", col: tm, text: "24:00:00", want: int64(86400000000)},
		{name: "time 24:00:01", col: tm, text: "24:00:01", wantErr: "invalid time"},
		{name: "time 24:00:00.5", col: tm, text: "24:00:00.5", wantErr: "invalid time"},
		{name: "time 23:60", col: tm, text: "23:60:00", wantErr: "invalid time"},
	})
}

func TestConvertTemporalOld(t *testing.T) {
	date := Column{TypeOID: 1082, NotNull: true}
	ts := Column{TypeOID: 1114, NotNull: true}
	tstz := Column{TypeOID: 1184, NotNull: true}
	runConvertCases(t, CapabilitiesFor(18, 16), []convertCase{
		{name: "date epoch", col: date, text: "1970-01-01", want: int32(0)},
		{name: "date 1899", col: date, text: "1899-12-31", want: int32(-25568)},
		{name: "date 2300", col: date, text: "2300-01-01", want: int32(120530)},
		{name: "date year 1", col: date, text: "0001-01-01", want: int32(-719162)},
		{name: "date 1 BC", col: date, text: "0001-12-31 BC", want: int32(-719163)},
		{name: "date 44 BC", col: date, text: "0044-03-15 BC", want: int32(daysOf(-43, 3, 15))},
		{name: "date 1 BC leap day", col: date, text: "0001-02-29 BC", want: int32(daysOf(0, 2, 29))},
		{name: "date min", col: date, text: "4714-11-24 BC", want: int32(daysOf(-4713, 11, 24))},
		{name: "date max", col: date, text: "5874897-12-31", want: int32(daysOf(5874897, 12, 31))},
		{name: "date year 0", col: date, text: "0000-01-01", wantErr: "invalid date"},
		{name: "date infinity", col: date, text: "infinity", want: int32(math.MaxInt32)},
		{name: "date -infinity", col: date, text: "-infinity", want: int32(math.MinInt32)},
		{name: "date Infinity is not infinity", col: date, text: "Infinity", wantErr: "invalid date"},
		{name: "date at the infinity sentinel", col: date, text: "5881580-07-11", wantErr: `Int32 can't hold "5881580-07-11": value not representable; ` + textFix},
		{name: "date past the infinity sentinel", col: date, text: "5881580-07-12", wantErr: "Int32 can't hold"},
		{name: "date at the -infinity sentinel", col: date, text: "5877642-06-23 BC", wantErr: "Int32 can't hold"},
		{name: "date just below the end", col: date, text: "5881580-07-10", want: int32(math.MaxInt32 - 1)},
		{name: "date just above the start", col: date, text: "5877642-06-24 BC", want: int32(math.MinInt32 + 1)},
		{name: "timestamp 1899", col: ts, text: "1899-12-31 23:59:59.999999", want: int64(-2208988800000001)},
		{name: "timestamp 2300", col: ts, text: "2300-01-01 00:00:00", want: int64(10413792000000000)},
		{name: "timestamp epoch", col: ts, text: "1970-01-01 00:00:00", want: int64(0)},
		{name: "timestamp before epoch", col: ts, text: "1969-12-31 23:59:59.999999", want: int64(-1)},
		{name: "timestamp 5 digit year", col: ts, text: "10000-01-01 00:00:00", want: microsOf(utc(10000, 1, 1, 0, 0, 0, 0))},
		{name: "timestamp BC", col: ts, text: "0044-03-15 12:00:00.5 BC", want: microsOf(utc(-43, 3, 15, 12, 0, 0, 500000))},
		{name: "timestamptz BC with offset", col: tstz, text: "0044-03-15 12:00:00+01 BC", want: microsOf(utc(-43, 3, 15, 11, 0, 0, 0))},
		{name: "timestamp PG max", col: ts, text: "294276-12-31 23:59:59.999999", wantErr: "Int64 can't hold"},
		{name: "timestamp last finite", col: ts, text: "294247-01-10 04:00:54.775806", want: int64(math.MaxInt64 - 1)},
		{name: "timestamp at the infinity sentinel", col: ts, text: "294247-01-10 04:00:54.775807", wantErr: "Int64 can't hold \"294247-01-10 04:00:54.775807\": value not representable; " + textFix},
		{name: "timestamptz at the infinity sentinel", col: tstz, text: "294247-01-10 05:00:54.775807+01", wantErr: textFix},
		{name: "timestamp past int64 end", col: ts, text: "294247-01-10 04:00:54.775808", wantErr: "Int64 can't hold"},
		{name: "timestamp infinity", col: ts, text: "infinity", want: int64(math.MaxInt64)},
		{name: "timestamp -infinity", col: ts, text: "-infinity", want: int64(math.MinInt64)},
		{name: "timestamptz infinity", col: tstz, text: "infinity", want: int64(math.MaxInt64)},
		{name: "timestamptz -infinity", col: tstz, text: "-infinity", want: int64(math.MinInt64)},
		{name: "timestamp PG min", col: ts, text: "4714-11-24 00:00:00 BC", want: int64(-210866803200000000)},
		{name: "timestamp +infinity is not infinity", col: ts, text: "+infinity", wantErr: "invalid timestamp"},
		{name: "timestamp far but fits", col: ts, text: "200000-01-01 00:00:00", want: microsOf(utc(200000, 1, 1, 0, 0, 0, 0))},
	})
}

// daysOf is the day number of a date (astronomical year) per package time.
func daysOf(y int, m time.Month, d int) int64 {
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400
}

// microsOf is t in microseconds since the epoch, per package time.
func microsOf(t time.Time) int64 {
	return (t.Unix()-utc(1970, 1, 1, 0, 0, 0, 0).Unix())*1_000_000 + int64(t.Nanosecond()/1000)
}

func TestCHDayBounds(t *testing.T) {
	tests := []struct {
		name string
		got  int64
		want int64
	}{
		{"min", minCHDay, daysOf(1900, 1, 1)},
		{"max", maxCHDay, daysOf(2299, 12, 31)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %d, want %d", tt.got, tt.want)
			}
		})
	}
}

// pgTimestampText formats t (UTC) the way PostgreSQL prints a timestamp with
// DateStyle ISO, using package time for the calendar.
func pgTimestampText(t time.Time) string {
	y, mo, d := t.Date()
	era := ""
	if y <= 0 {
		y, era = 1-y, " BC"
	}
	s := fmt.Sprintf("%04d-%02d-%02d %02d:%02d:%02d", y, mo, d, t.Hour(), t.Minute(), t.Second())
	if us := t.Nanosecond() / 1000; us != 0 {
		s += fmt.Sprintf(".%06d", us)
		for s[len(s)-1] == '0' {
			s = s[:len(s)-1]
		}
	}
	return s + era
}

func FuzzTimestampText(f *testing.F) {
	for _, us := range []int64{0, -1, 1, 1e15, -2208988800000001, -210866803200000000, 9223371331199999999 - 1e18} {
		f.Add(us)
	}
	// PostgreSQL's range: 4714-11-24 BC to 294276-12-31 AD, as micros since
	// 1970 (the top cut where int64 ends).
	const lo, hi = -210866803200000000, math.MaxInt64
	f.Fuzz(func(t *testing.T, us int64) {
		if us < lo || us > hi-1 {
			low := int64(lo)
			us = int64(uint64(low) + uint64(us)%(uint64(hi-1)+uint64(-low)))
		}
		tm := time.Unix(us/1e6, (us%1e6)*1000).UTC()
		if us%1e6 < 0 {
			tm = time.Unix(us/1e6-1, (us%1e6+1e6)*1000).UTC()
		}
		text := pgTimestampText(tm)
		got, err := parseTimestampMicros([]byte(text))
		if err != nil || got != us {
			t.Fatalf("parse(%q) = %d, %v; want %d", text, got, err, us)
		}
	})
}

// FuzzISOTimestamp: whatever text the fast path reads, the general parser
// reads to the same microseconds.
func FuzzISOTimestamp(f *testing.F) {
	for _, s := range []string{"2024-01-02 03:04:05.123456+00", "2024-01-02 03:04:05", "1000-01-01 00:00:00.1",
		"9999-12-31 23:59:59.999999+00", "2024-02-30 00:00:00", "2024-01-02 24:00:00", "0999-01-01 00:00:00",
		"2024-01-02 03:04:05.1234567", "2024-01-02 03:04:05.+00", "2024-01-02 03:04:05+01", "2024-01-02 03:04:05 BC",
		"2024-01-02T03:04:05", "2O24-01-02 03:04:05", "2024-01-02 03:04:05.-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fast, ok := isoTimestamp([]byte(s))
		general, err := parseAnyTimestamp([]byte(s), "Int64")
		if ok && (err != nil || fast != general) {
			t.Fatalf("%q: fast path %d, general parser %d, %v", s, fast, general, err)
		}
	})
}

// TestISOTimestampTakesPostgresText: PostgreSQL's text of a timestamp of
// the years 1000 to 9999, with and without timestamptz's "+00", takes the
// fast path.
func TestISOTimestampTakesPostgresText(t *testing.T) {
	for _, us := range []int64{0, 1, -1, 1_700_000_000_123_456, -30_610_224_000_000_000, 253_402_300_799_999_999, 951_782_400_500_000} {
		tm := time.UnixMicro(us).UTC()
		for _, text := range []string{pgTimestampText(tm), pgTimestampText(tm) + "+00"} {
			got, ok := isoTimestamp([]byte(text))
			if !ok || got != us {
				t.Errorf("%q: fast path %d, %v; want %d", text, got, ok, us)
			}
		}
	}
}

// BenchmarkParseTimestamp: the text of a timestamptz through the fast path
// and through the general parser.
func BenchmarkParseTimestamp(b *testing.B) {
	text := []byte("2024-01-02 03:04:05.123456+00")
	for _, p := range []struct {
		name  string
		parse func([]byte, string) (int64, error)
	}{{"fast", parseTimestamp}, {"general", parseAnyTimestamp}} {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := p.parse(text, "Int64"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
