package schema

import "strconv"

// PostgreSQL type OIDs that ferry maps on purpose to String in PostgreSQL's
// text form (see textType), or to an unsigned integer.
const (
	oidRegproc       = 24
	oidTID           = 27
	oidXID           = 28
	oidCID           = 29
	oidXML           = 142
	oidPoint         = 600
	oidLseg          = 601
	oidPath          = 602
	oidBox           = 603
	oidPolygon       = 604
	oidLine          = 628
	oidCIDR          = 650
	oidCircle        = 718
	oidMacaddr8      = 774
	oidMoney         = 790
	oidMacaddr       = 829
	oidInet          = 869
	oidInterval      = 1186
	oidTimetz        = 1266
	oidBit           = 1560
	oidVarbit        = 1562
	oidRegprocedure  = 2202
	oidRegoper       = 2203
	oidRegoperator   = 2204
	oidRegclass      = 2205
	oidRegtype       = 2206
	oidTxidSnapshot  = 2970
	oidPgLSN         = 3220
	oidTSVector      = 3614
	oidTSQuery       = 3615
	oidRegconfig     = 3734
	oidRegdictionary = 3769
	oidInt4range     = 3904
	oidNumrange      = 3906
	oidTsrange       = 3908
	oidTstzrange     = 3910
	oidDaterange     = 3912
	oidInt8range     = 3926
	oidJSONPath      = 4072
	oidRegnamespace  = 4089
	oidRegrole       = 4096
	oidRegcollation  = 4191
	oidInt4multi     = 4451
	oidNummulti      = 4532
	oidTsmulti       = 4533
	oidTstzmulti     = 4534
	oidDatemulti     = 4535
	oidInt8multi     = 4536
	oidPgSnapshot    = 5038
	oidXID8          = 5069
)

// textType reports the built-in types whose best lossless ClickHouse type
// is String holding PostgreSQL's text form: ClickHouse has no type that holds
// every value of them exactly (an interval's months, days and microseconds;
// an inet's netmask; a timetz's offset; ranges with their bounds' inclusivity;
// geometry's float8 coordinates, printed exactly with extra_float_digits=3).
func textType(oid uint32) bool {
	switch oid {
	case oidInterval, oidTimetz,
		oidInet, oidCIDR, oidMacaddr, oidMacaddr8,
		oidMoney, oidBit, oidVarbit,
		oidTSVector, oidTSQuery, oidXML, oidJSONPath,
		oidInt4range, oidInt8range, oidNumrange, oidTsrange, oidTstzrange, oidDaterange,
		oidInt4multi, oidInt8multi, oidNummulti, oidTsmulti, oidTstzmulti, oidDatemulti,
		oidPoint, oidLine, oidLseg, oidBox, oidPath, oidPolygon, oidCircle,
		oidTxidSnapshot, oidPgSnapshot, oidTID,
		oidRegproc, oidRegprocedure, oidRegoper, oidRegoperator, oidRegclass, oidRegtype,
		oidRegconfig, oidRegdictionary, oidRegnamespace, oidRegrole, oidRegcollation:
		return true
	}
	return false
}

// textExtensionType reports the extension types, which have no fixed OID,
// that ferry recognises by their unqualified type name and maps to String
// in their text form: citext, hstore ("k"=>"v" pairs) and PostGIS geometry
// and geography (hex EWKB, SRID included). A table's own type of the same
// name is also a String of its text form, which is lossless for any type:
// only the fallback warning is lost.
func textExtensionType(name string) bool {
	switch name {
	case "citext", "hstore", "geometry", "geography":
		return true
	}
	return false
}

// parseUint32Of parses a base-10 unsigned 32-bit integer (oid, xid, cid).
func parseUint32Of(typ string) parser[uint32] {
	return func(text []byte) (uint32, error) {
		v, err := strconv.ParseUint(string(text), 10, 32)
		if err != nil {
			return 0, invalid(typ, text)
		}
		return uint32(v), nil
	}
}

// parseXID8 parses xid8 text, a base-10 unsigned 64-bit integer.
func parseXID8(text []byte) (uint64, error) {
	v, err := strconv.ParseUint(string(text), 10, 64)
	if err != nil {
		return 0, invalid("xid8", text)
	}
	return v, nil
}

// parsePgLSN parses pg_lsn text "X/Y" (each part 1 to 8 hex digits, the
// high and low 32 bits) into the 64-bit WAL position, so that ClickHouse
// orders LSNs as PostgreSQL does.
func parsePgLSN(text []byte) (uint64, error) {
	slash := -1
	for i, c := range text {
		if c == '/' {
			slash = i
			break
		}
	}
	if slash < 1 || slash > 8 || len(text)-slash-1 < 1 || len(text)-slash-1 > 8 {
		return 0, invalid("pg_lsn", text)
	}
	hi, okHi := hexValue(text[:slash])
	lo, okLo := hexValue(text[slash+1:])
	if !okHi || !okLo {
		return 0, invalid("pg_lsn", text)
	}
	return hi<<32 | lo, nil
}

// hexValue is the value of b, all hex digits of either case (at most 16).
func hexValue(b []byte) (uint64, bool) {
	var v uint64
	for _, c := range b {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		v = v<<4 | uint64(d)
	}
	return v, len(b) > 0
}
