pytest_plugins = ["tests.support.s3", "tests.support.spark35", "tests.spark.plugin"]
