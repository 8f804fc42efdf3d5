package kafka

// LegacyFormat makes a publisher write ferry's form before Debezium
// compatibility, as a publisher of an earlier ferry did: for the tests of
// a pipeline's upgrade.
func LegacyFormat(cfg *Config) { cfg.Format.legacy = true }
