from django.apps import AppConfig


class BenchConfig(AppConfig):
    name = "tests.bench"
    label = "bench"
    verbose_name = "Benchmarks"
