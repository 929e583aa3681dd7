"""A lockstep child's heap release on the real JVM: a full GC runs and the flag it lowers for it is
restored."""

from workloads.replay.heap_release import give_back_heap


def _diagnostic(jvm):
    cls = jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    return jvm.java.lang.management.ManagementFactory.getPlatformMXBean(cls)


def _collections(jvm):
    return sum(b.getCollectionCount() for b in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans())


def test_giving_heap_back_collects_and_restores_the_free_ratio(spark):
    jvm = spark._jvm
    bean = _diagnostic(jvm)
    old = bean.getVMOption("MaxHeapFreeRatio").getValue()
    rt = jvm.java.lang.Runtime.getRuntime()
    try:
        spark.range(300_000).selectExpr("cast(id AS string) AS s").groupBy("s").count().count()  # some garbage
        gcs, committed = _collections(jvm), rt.totalMemory()
        bean.setVMOption("MaxHeapFreeRatio", "55")  # not the JVM default: restored, not reset
        released = give_back_heap(spark)
        assert bean.getVMOption("MaxHeapFreeRatio").getValue() == "55"
        assert _collections(jvm) > gcs  # the full GC ran
        assert 0 <= released <= committed and rt.totalMemory() <= committed
    finally:
        bean.setVMOption("MaxHeapFreeRatio", old)  # the rest of the suite shares this JVM
