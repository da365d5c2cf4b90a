pytest_plugins = ["tests.support.s3", "tests.spark.plugin"]
