package schema

import (
	"bytes"
	"math"
	"time"
)

const (
	microsPerSecond = 1_000_000
	microsPerDay    = 86_400 * microsPerSecond

	// minCHDay and maxCHDay bound Date32 and DateTime64 in days since
	// 1970-01-01: 1900-01-01 and 2299-12-31.
	minCHDay = -25567
	maxCHDay = 120529
)

// epoch is 1970-01-01 00:00:00 UTC, the zero of Date32 and DateTime64.
func epoch() time.Time { return time.Unix(0, 0).UTC() }

// parseDateDays parses date text into days since 1970-01-01; any finite
// PostgreSQL date fits, strictly between math.MinInt32 and math.MaxInt32,
// which stand for -infinity and infinity as in PostgreSQL (DATEVAL_NOBEGIN,
// DATEVAL_NOEND).
func parseDateDays(text []byte) (int32, error) {
	switch string(text) {
	case "infinity":
		return math.MaxInt32, nil
	case "-infinity":
		return math.MinInt32, nil
	}
	days, err := parseDate(text, "Int32")
	if err != nil {
		return 0, err
	}
	if days <= math.MinInt32 || days >= math.MaxInt32 {
		return 0, unrepresentable("Int32", text)
	}
	return int32(days), nil
}

// parseDate32 parses date text into UTC midnight of that day, which must lie
// in Date32's range.
func parseDate32(text []byte) (time.Time, error) {
	days, err := parseDate(text, "Date32")
	if err != nil {
		return time.Time{}, err
	}
	if days < minCHDay || days > maxCHDay {
		return time.Time{}, unrepresentable("Date32 (1900-01-01 to 2299-12-31)", text)
	}
	return time.Unix(days*86_400, 0).UTC(), nil
}

// parseTimestampMicros parses timestamp or timestamptz text into
// microseconds since 1970-01-01 00:00:00 UTC. math.MinInt64 and
// math.MaxInt64 stand for -infinity and infinity as in PostgreSQL
// (DT_NOBEGIN, DT_NOEND), so a finite timestamp must lie strictly between
// them: up to 294247-01-10 04:00:54.775806 UTC.
func parseTimestampMicros(text []byte) (int64, error) {
	switch string(text) {
	case "infinity":
		return math.MaxInt64, nil
	case "-infinity":
		return math.MinInt64, nil
	}
	us, err := parseTimestamp(text, "Int64")
	if err != nil {
		return 0, err
	}
	if us == math.MinInt64 || us == math.MaxInt64 {
		return 0, unrepresentable("Int64", text)
	}
	return us, nil
}

// parseDateTime64 parses timestamp or timestamptz text into a UTC time,
// which must lie in DateTime64's range.
func parseDateTime64(text []byte) (time.Time, error) {
	us, err := parseDateTime64Micros(text)
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMicro(us).UTC(), nil
}

// parseDateTime64Micros is parseDateTime64's time in microseconds since
// 1970.
func parseDateTime64Micros(text []byte) (int64, error) {
	const chType = "DateTime64 (1900-01-01 to 2299-12-31)"
	us, err := parseTimestamp(text, chType)
	if err != nil {
		return 0, err
	}
	if us < minCHDay*microsPerDay || us >= (maxCHDay+1)*microsPerDay {
		return 0, unrepresentable(chType, text)
	}
	return us, nil
}

// parseTimeMicros parses time text into microseconds since midnight;
// 24:00:00 is the end of the day.
func parseTimeMicros(text []byte) (int64, error) {
	tod, rest, ok := parseClock(text, true)
	if !ok || len(rest) != 0 {
		return 0, invalid("time", text)
	}
	return tod, nil
}

// isInfinity reports PostgreSQL's infinite dates and timestamps.
func isInfinity(text []byte) bool {
	return string(text) == "infinity" || string(text) == "-infinity"
}

// parseDate parses "Y-MM-DD[ BC]" (Y of four or more digits) into days
// since 1970-01-01 in the proleptic Gregorian calendar.
func parseDate(text []byte, chType string) (int64, error) {
	if isInfinity(text) {
		return 0, unrepresentable(chType, text)
	}
	body, bc := bytes.CutSuffix(text, []byte(" BC"))
	days, rest, ok := parseYMD(body, bc)
	if !ok || len(rest) != 0 {
		return 0, invalid("date", text)
	}
	return days, nil
}

// parseTimestamp parses "Y-MM-DD HH:MM:SS[.ffffff][±HH[:MM[:SS]]][ BC]"
// into microseconds since 1970-01-01 00:00:00 UTC, applying the offset.
func parseTimestamp(text []byte, chType string) (int64, error) {
	if us, ok := isoTimestamp(text); ok {
		return us, nil
	}
	return parseAnyTimestamp(text, chType)
}

// parseAnyTimestamp is parseTimestamp without the fast path.
func parseAnyTimestamp(text []byte, chType string) (int64, error) {
	if isInfinity(text) {
		return 0, unrepresentable(chType, text)
	}
	body, bc := bytes.CutSuffix(text, []byte(" BC"))
	days, rest, ok := parseYMD(body, bc)
	if !ok || len(rest) == 0 || rest[0] != ' ' {
		return 0, invalid("timestamp", text)
	}
	tod, rest, ok := parseClock(rest[1:], false)
	if !ok {
		return 0, invalid("timestamp", text)
	}
	offset, ok := parseOffset(rest)
	if !ok {
		return 0, invalid("timestamp", text)
	}
	us, ok := dayMicros(days, tod-offset)
	if !ok {
		return 0, unrepresentable(chType, text)
	}
	return us, nil
}

// isoTimestamp is parseTimestamp's fast path, for the text PostgreSQL
// writes for ferry's sessions (DateStyle ISO, TimeZone UTC) of a year from
// 1000 to 9999: "YYYY-MM-DD HH:MM:SS[.f{1,6}][+00]". ok is false for any
// other text, which the general parser then reads.
func isoTimestamp(t []byte) (us int64, ok bool) {
	n := len(t)
	if n >= 3 && t[n-3] == '+' && t[n-2] == '0' && t[n-1] == '0' {
		n -= 3
	}
	if n < 19 || t[4] != '-' || t[7] != '-' || t[10] != ' ' || t[13] != ':' || t[16] != ':' {
		return 0, false
	}
	var digits [14]int64
	for i, at := range [14]int{0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18} {
		c := t[at]
		if c < '0' || c > '9' {
			return 0, false
		}
		digits[i] = int64(c - '0')
	}
	year := digits[0]*1000 + digits[1]*100 + digits[2]*10 + digits[3]
	month, day := digits[4]*10+digits[5], digits[6]*10+digits[7]
	h, m, s := digits[8]*10+digits[9], digits[10]*10+digits[11], digits[12]*10+digits[13]
	if year < 1000 || month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month) || h > 23 || m > 59 || s > 59 {
		return 0, false
	}
	var frac int64
	if n > 19 {
		f := t[19:n]
		if f[0] != '.' || len(f) < 2 || len(f) > 7 {
			return 0, false
		}
		for _, c := range f[1:] {
			if c < '0' || c > '9' {
				return 0, false
			}
			frac = frac*10 + int64(c-'0')
		}
		for range 7 - len(f) {
			frac *= 10
		}
	}
	return daysFromCivil(year, month, day)*microsPerDay + ((h*60+m)*60+s)*microsPerSecond + frac, true
}

// dayMicros is days*microsPerDay + us; ok is false on int64 overflow.
func dayMicros(days, us int64) (int64, bool) {
	if days > math.MaxInt64/microsPerDay || days < math.MinInt64/microsPerDay {
		return 0, false
	}
	d := days * microsPerDay
	if (us > 0 && d > math.MaxInt64-us) || (us < 0 && d < math.MinInt64-us) {
		return 0, false
	}
	return d + us, true
}

// parseYMD parses "Y-MM-DD" at the start of b and returns the day number
// and what follows. bc makes the year a BC one (1 BC is year 0).
func parseYMD(b []byte, bc bool) (days int64, rest []byte, ok bool) {
	n := 0
	for n < len(b) && n < 10 && isDigit(b[n]) {
		n++
	}
	if n < 4 || n > 9 || len(b) < n+6 || b[n] != '-' || b[n+3] != '-' {
		return 0, nil, false
	}
	year, _ := digitsValue(b[:n])
	month, okM := digitsValue(b[n+1 : n+3])
	day, okD := digitsValue(b[n+4 : n+6])
	if year == 0 || !okM || !okD {
		return 0, nil, false
	}
	if bc {
		year = 1 - year
	}
	if month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month) {
		return 0, nil, false
	}
	return daysFromCivil(year, month, day), b[n+6:], true
}

// parseClock parses "HH:MM:SS[.f{1,6}]" at the start of b into microseconds
// since midnight. allow24 admits 24:00:00 (the time type's end of day).
func parseClock(b []byte, allow24 bool) (us int64, rest []byte, ok bool) {
	if len(b) < 8 || b[2] != ':' || b[5] != ':' {
		return 0, nil, false
	}
	h, okH := digitsValue(b[0:2])
	m, okM := digitsValue(b[3:5])
	s, okS := digitsValue(b[6:8])
	if !okH || !okM || !okS || m > 59 || s > 59 || h > 24 {
		return 0, nil, false
	}
	frac, rest, ok := parseFraction(b[8:])
	if !ok || (h == 24 && (!allow24 || m != 0 || s != 0 || frac != 0)) {
		return 0, nil, false
	}
	return ((h*60+m)*60+s)*microsPerSecond + frac, rest, true
}

// parseFraction parses an optional ".f{1,6}" into microseconds.
func parseFraction(b []byte) (us int64, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '.' {
		return 0, b, true
	}
	n := 1
	for n < len(b) && isDigit(b[n]) {
		n++
	}
	if n == 1 || n > 7 {
		return 0, nil, false
	}
	us, _ = digitsValue(b[1:n])
	for i := n; i < 7; i++ {
		us *= 10
	}
	return us, b[n:], true
}

// parseOffset parses an optional UTC offset "±HH[:MM[:SS]]" into
// microseconds east of UTC; b must hold nothing else.
func parseOffset(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, true
	}
	if b[0] != '+' && b[0] != '-' {
		return 0, false
	}
	var parts [3]int64
	rest := b[1:]
	for i := range parts {
		if len(rest) < 2 {
			return 0, false
		}
		v, ok := digitsValue(rest[:2])
		if !ok || (i > 0 && v > 59) {
			return 0, false
		}
		parts[i], rest = v, rest[2:]
		if len(rest) == 0 {
			break
		}
		if rest[0] != ':' || i == 2 {
			return 0, false
		}
		rest = rest[1:]
	}
	off := ((parts[0]*60+parts[1])*60 + parts[2]) * microsPerSecond
	if b[0] == '-' {
		off = -off
	}
	return off, true
}

// digitsValue is the value of an all-digit b (at most 18 digits).
func digitsValue(b []byte) (int64, bool) {
	var v int64
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, len(b) > 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// daysInMonth is the length of a month of the proleptic Gregorian calendar.
func daysInMonth(year, month int64) int64 {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil is the number of days from 1970-01-01 to the given date of
// the proleptic Gregorian calendar (astronomical year numbering).
func daysFromCivil(year, month, day int64) int64 {
	if month <= 2 {
		year--
	}
	era := year / 400
	if year < 0 && year%400 != 0 {
		era--
	}
	yoe := year - era*400
	mp := (month + 9) % 12
	doy := (153*mp+2)/5 + day - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146_097 + doe - 719_468
}
