/*
 * chdb-server: serve ClickHouse's native and HTTP protocols from libchdb.
 *
 * libchdb (the npm package @chdb/lib-linux-x64-gnu) is the ClickHouse engine
 * as a shared library. Its chdb_query_cmdline runs clickhouse-local with a
 * command line, and clickhouse-local serves the network protocols for as
 * long as a query runs once it has executed SYSTEM START LISTEN TCP/HTTP.
 * deploy/stack.sh passes a query that starts both listeners and then never
 * ends, so this process is a ClickHouse server until it is killed.
 *
 *   chdb-server LIBCHDB.so [clickhouse-local arguments...]
 *
 * Exit status: 1 when the library cannot be loaded or the query fails (its
 * error on stderr), 0 when the query ends.
 */
#include <dlfcn.h>
#include <stdio.h>

typedef void *(*query_cmdline_fn)(int argc, char **argv);
typedef const char *(*result_error_fn)(void *result);

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s LIBCHDB.so [clickhouse-local arguments...]\n", argv[0]);
		return 2;
	}
	void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		fprintf(stderr, "chdb-server: load %s: %s\n", argv[1], dlerror());
		return 1;
	}
	query_cmdline_fn query = (query_cmdline_fn)dlsym(lib, "chdb_query_cmdline");
	result_error_fn error = (result_error_fn)dlsym(lib, "chdb_result_error");
	if (query == NULL || error == NULL) {
		fprintf(stderr, "chdb-server: %s lacks chdb_query_cmdline or chdb_result_error\n", argv[1]);
		return 1;
	}
	/* clickhouse-local reads argv[0] as its program name. */
	argv[1] = "clickhouse-local";
	void *result = query(argc - 1, argv + 1);
	const char *msg = result != NULL ? error(result) : "chdb_query_cmdline returned no result";
	if (msg != NULL && *msg != '\0') {
		fprintf(stderr, "chdb-server: %s\n", msg);
		return 1;
	}
	return 0;
}
