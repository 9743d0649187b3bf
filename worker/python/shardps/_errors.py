"""shardps.Error: what a failed call into the servers raises."""


class Error(RuntimeError):
    """A call failed. `code` is the gRPC/absl status code (an int, e.g. 5
    for NOT_FOUND), `code_name` its name, `message` the servers' (or the
    client's) explanation, naming the table, keys, shard and server."""

    def __init__(self, code, code_name, message):
        super().__init__(f"{code_name}: {message}")
        self.code = code
        self.code_name = code_name
        self.message = message
