/*
 * Test oracle for colcep's window triggers and evictors: runs each case of a cases JSON file as its
 * own small Flink 2.3 DataStream job (event time, parallelism 1) on one MiniCluster and writes the
 * cases back with "expected" filled in. Built and run by oracle.py next to this file; see README.md.
 *
 *   java -cp <build dir>:<pyflink lib>/* WindowOracle IN.json OUT.json
 *
 * Per case: source = the rows in arrival order (Tuple4 key, ts, value, row index); timestamps = ts;
 * a watermark of (max ts so far) - bound - 1 after every row (nothing periodic); keyBy(key);
 * window(assigner); trigger (wrapped in Recording, which notes the cause of each FIRE);
 * evictor; allowedLateness; sideOutputLateData; process(Fn). Fn records every firing as
 * [key, window_start, window_end, seq, kind, watermark, [row indices in iteration order]], and
 * in "fire_times" the time of the timer that fired it (null: fired on an element).
 */

import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.serialization.SerializerConfigImpl;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ReducingStateDescriptor;
import org.apache.flink.api.common.state.State;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple4;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.JsonNodeFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.datastream.WindowedStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.functions.windowing.delta.DeltaFunction;
import org.apache.flink.streaming.api.windowing.assigners.EventTimeSessionWindows;
import org.apache.flink.streaming.api.windowing.assigners.GlobalWindows;
import org.apache.flink.streaming.api.windowing.assigners.MergingWindowAssigner;
import org.apache.flink.streaming.api.windowing.assigners.SlidingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.assigners.WindowAssigner;
import org.apache.flink.streaming.api.windowing.evictors.CountEvictor;
import org.apache.flink.streaming.api.windowing.evictors.DeltaEvictor;
import org.apache.flink.streaming.api.windowing.evictors.Evictor;
import org.apache.flink.streaming.api.windowing.evictors.TimeEvictor;
import org.apache.flink.streaming.api.windowing.triggers.ContinuousEventTimeTrigger;
import org.apache.flink.streaming.api.windowing.triggers.CountTrigger;
import org.apache.flink.streaming.api.windowing.triggers.DeltaTrigger;
import org.apache.flink.streaming.api.windowing.triggers.EventTimeTrigger;
import org.apache.flink.streaming.api.windowing.triggers.PurgingTrigger;
import org.apache.flink.streaming.api.windowing.triggers.Trigger;
import org.apache.flink.streaming.api.windowing.triggers.TriggerResult;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.streaming.api.windowing.windows.Window;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

import java.io.File;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

@SuppressWarnings({"rawtypes", "unchecked", "serial"})
public class WindowOracle {

    /** Elements: (key, ts, value, row index). */
    static final TypeInformation<Tuple4<String, Long, Double, Integer>> TYPE =
            Types.TUPLE(Types.STRING, Types.LONG, Types.DOUBLE, Types.INT);
    static final TypeSerializer<Tuple4<String, Long, Double, Integer>> SERIALIZER =
            TYPE.createSerializer(new SerializerConfigImpl());
    static final JsonNodeFactory NF = JsonNodeFactory.instance;

    // Results of the job being run. One job at a time, parallelism 1: the window operator's task
    // thread writes them, the main thread reads them after the job has finished.
    static final List<JsonNode> FIRINGS = Collections.synchronizedList(new ArrayList<>());
    static final List<Integer> LATE = Collections.synchronizedList(new ArrayList<>());
    /** Per firing: the timer's time if it fired from onEventTime, null if from onElement. */
    static final List<Long> FIRE_TIMES = Collections.synchronizedList(new ArrayList<>());
    /** Cause of the last FIRE returned by the outermost trigger (Recording). */
    static volatile String CAUSE = null;
    static volatile Long CAUSE_TIME = null;
    static final int MAX_FIRINGS = Integer.getInteger("oracle.maxFirings", 20000);

    // ---------------------------------------------------------------- watermarks, key, delta

    /** After every row: (max ts so far) - bound - 1. Nothing periodic. */
    static final class PerEvent implements WatermarkGenerator<Tuple4<String, Long, Double, Integer>> {
        final long bound;
        long max = Long.MIN_VALUE;

        PerEvent(long bound) {
            this.bound = bound;
        }

        @Override
        public void onEvent(Tuple4<String, Long, Double, Integer> e, long ts, WatermarkOutput out) {
            max = Math.max(max, ts);
            out.emitWatermark(new Watermark(max - bound - 1));
        }

        @Override
        public void onPeriodicEmit(WatermarkOutput out) {}
    }

    static final class ByKey implements KeySelector<Tuple4<String, Long, Double, Integer>, String> {
        @Override
        public String getKey(Tuple4<String, Long, Double, Integer> t) {
            return t.f0;
        }
    }

    /** |a.value - b.value|. */
    static final class AbsDelta implements DeltaFunction<Tuple4<String, Long, Double, Integer>> {
        @Override
        public double getDelta(
                Tuple4<String, Long, Double, Integer> a, Tuple4<String, Long, Double, Integer> b) {
            return Math.abs(a.f2 - b.f2);
        }
    }

    // ---------------------------------------------------------------- triggers

    /** Delegates everything; notes the cause of every FIRE it returns in CAUSE. */
    static final class Recording<W extends Window> extends Trigger<Object, W> {
        final Trigger<Object, W> inner;

        Recording(Trigger<Object, W> inner) {
            this.inner = inner;
        }

        @Override
        public TriggerResult onElement(Object e, long ts, W w, TriggerContext ctx) throws Exception {
            TriggerResult r = inner.onElement(e, ts, w, ctx);
            if (r.isFire()) {
                CAUSE = ctx.getCurrentWatermark() < w.maxTimestamp() ? "early" : "late";
                CAUSE_TIME = null;
            }
            return r;
        }

        @Override
        public TriggerResult onEventTime(long time, W w, TriggerContext ctx) throws Exception {
            TriggerResult r = inner.onEventTime(time, w, ctx);
            if (r.isFire()) {
                long m = w.maxTimestamp();
                CAUSE = time < m ? "early" : time == m ? "on_time" : "late";
                CAUSE_TIME = time;
            }
            return r;
        }

        @Override
        public TriggerResult onProcessingTime(long time, W w, TriggerContext ctx) throws Exception {
            return inner.onProcessingTime(time, w, ctx);
        }

        @Override
        public boolean canMerge() {
            return inner.canMerge();
        }

        @Override
        public void onMerge(W w, OnMergeContext ctx) throws Exception {
            inner.onMerge(w, ctx);
        }

        @Override
        public void clear(W w, TriggerContext ctx) throws Exception {
            inner.clear(w, ctx);
        }

        @Override
        public String toString() {
            return "Recording(" + inner + ")";
        }
    }

    /**
     * OR of its sub-triggers (not in Flink). Every method calls every sub-trigger, no short
     * circuit; fires if any fires, purges if any purges. Each sub-trigger's state lives under its
     * own name ("any<i>/" + the name it asks for), so two sub-triggers of the same kind (or a
     * PurgingTrigger of the same kind) do not share one counter. Timers are shared by all, as
     * Flink timers are per (key, window, time).
     */
    static final class AnyTrigger<W extends Window> extends Trigger<Object, W> {
        final List<Trigger<Object, W>> subs;

        AnyTrigger(List<Trigger<Object, W>> subs) {
            this.subs = subs;
        }

        private TriggerResult combine(boolean fire, boolean purge) {
            if (fire && purge) {
                return TriggerResult.FIRE_AND_PURGE;
            } else if (fire) {
                return TriggerResult.FIRE;
            } else if (purge) {
                return TriggerResult.PURGE;
            }
            return TriggerResult.CONTINUE;
        }

        @Override
        public TriggerResult onElement(Object e, long ts, W w, TriggerContext ctx) throws Exception {
            boolean fire = false, purge = false;
            for (int i = 0; i < subs.size(); i++) {
                TriggerResult r = subs.get(i).onElement(e, ts, w, new Scoped(i, ctx));
                fire |= r.isFire();
                purge |= r.isPurge();
            }
            return combine(fire, purge);
        }

        @Override
        public TriggerResult onEventTime(long time, W w, TriggerContext ctx) throws Exception {
            boolean fire = false, purge = false;
            for (int i = 0; i < subs.size(); i++) {
                TriggerResult r = subs.get(i).onEventTime(time, w, new Scoped(i, ctx));
                fire |= r.isFire();
                purge |= r.isPurge();
            }
            return combine(fire, purge);
        }

        @Override
        public TriggerResult onProcessingTime(long time, W w, TriggerContext ctx) throws Exception {
            boolean fire = false, purge = false;
            for (int i = 0; i < subs.size(); i++) {
                TriggerResult r = subs.get(i).onProcessingTime(time, w, new Scoped(i, ctx));
                fire |= r.isFire();
                purge |= r.isPurge();
            }
            return combine(fire, purge);
        }

        @Override
        public boolean canMerge() {
            boolean all = true;
            for (Trigger<Object, W> t : subs) {
                all &= t.canMerge();
            }
            return all;
        }

        @Override
        public void onMerge(W w, OnMergeContext ctx) throws Exception {
            for (int i = 0; i < subs.size(); i++) {
                subs.get(i).onMerge(w, new Scoped(i, ctx));
            }
        }

        @Override
        public void clear(W w, TriggerContext ctx) throws Exception {
            for (int i = 0; i < subs.size(); i++) {
                subs.get(i).clear(w, new Scoped(i, ctx));
            }
        }

        @Override
        public String toString() {
            return "Any" + subs;
        }

        /** Per-sub-trigger renamed state descriptors (descriptors are final fields of triggers). */
        private transient Map<StateDescriptor, StateDescriptor>[] renamed;

        StateDescriptor rename(int i, StateDescriptor d) {
            if (renamed == null) {
                renamed = new Map[subs.size()];
                for (int j = 0; j < renamed.length; j++) {
                    renamed[j] = new IdentityHashMap<>();
                }
            }
            StateDescriptor r = renamed[i].get(d);
            if (r == null) {
                String name = "any" + i + "/" + d.getName();
                if (d instanceof ReducingStateDescriptor) {
                    ReducingStateDescriptor rd = (ReducingStateDescriptor) d;
                    r = new ReducingStateDescriptor(name, rd.getReduceFunction(), rd.getSerializer());
                } else if (d instanceof ValueStateDescriptor) {
                    r = new ValueStateDescriptor(name, d.getSerializer());
                } else {
                    throw new IllegalStateException("AnyTrigger cannot scope state " + d);
                }
                renamed[i].put(d, r);
            }
            return r;
        }

        /** The operator's context with sub-trigger i's state names. */
        final class Scoped implements OnMergeContext {
            final int i;
            final TriggerContext base;

            Scoped(int i, TriggerContext base) {
                this.i = i;
                this.base = base;
            }

            @Override
            public long getCurrentProcessingTime() {
                return base.getCurrentProcessingTime();
            }

            @Override
            public MetricGroup getMetricGroup() {
                return base.getMetricGroup();
            }

            @Override
            public long getCurrentWatermark() {
                return base.getCurrentWatermark();
            }

            @Override
            public void registerProcessingTimeTimer(long time) {
                base.registerProcessingTimeTimer(time);
            }

            @Override
            public void registerEventTimeTimer(long time) {
                base.registerEventTimeTimer(time);
            }

            @Override
            public void deleteProcessingTimeTimer(long time) {
                base.deleteProcessingTimeTimer(time);
            }

            @Override
            public void deleteEventTimeTimer(long time) {
                base.deleteEventTimeTimer(time);
            }

            @Override
            public <S extends State> S getPartitionedState(StateDescriptor<S, ?> d) {
                return (S) base.getPartitionedState(rename(i, d));
            }

            @Override
            public void mergePartitionedState(StateDescriptor d) {
                ((OnMergeContext) base).mergePartitionedState(rename(i, d));
            }
        }
    }

    static Trigger buildTrigger(JsonNode t) {
        String kind = t.get("kind").asText();
        switch (kind) {
            case "event_time":
                return EventTimeTrigger.create();
            case "count":
                return CountTrigger.of(t.get("n").asLong());
            case "continuous":
                return ContinuousEventTimeTrigger.of(Duration.ofMillis(t.get("interval").asLong()));
            case "delta":
                return DeltaTrigger.of(t.get("threshold").asDouble(), new AbsDelta(), SERIALIZER);
            case "purging":
                return PurgingTrigger.of(buildTrigger(t.get("of")));
            case "any":
                List<Trigger> subs = new ArrayList<>();
                for (JsonNode s : t.get("of")) {
                    subs.add(buildTrigger(s));
                }
                return new AnyTrigger(subs);
            default:
                throw new IllegalArgumentException("unknown trigger kind " + kind);
        }
    }

    static Evictor buildEvictor(JsonNode e) {
        String kind = e.get("kind").asText();
        boolean after = e.has("after") && e.get("after").asBoolean();
        switch (kind) {
            case "count":
                return CountEvictor.of(e.get("n").asLong(), after);
            case "time":
                return TimeEvictor.of(Duration.ofMillis(e.get("size").asLong()), after);
            case "delta":
                return DeltaEvictor.of(e.get("threshold").asDouble(), new AbsDelta(), after);
            default:
                throw new IllegalArgumentException("unknown evictor kind " + kind);
        }
    }

    static WindowAssigner buildAssigner(JsonNode w) {
        String kind = w.get("kind").asText();
        long offset = w.has("offset") ? w.get("offset").asLong() : 0;
        switch (kind) {
            case "tumbling":
                return TumblingEventTimeWindows.of(
                        Duration.ofMillis(w.get("size").asLong()), Duration.ofMillis(offset));
            case "sliding":
                return SlidingEventTimeWindows.of(
                        Duration.ofMillis(w.get("size").asLong()),
                        Duration.ofMillis(w.get("slide").asLong()),
                        Duration.ofMillis(offset));
            case "session":
                return EventTimeSessionWindows.withGap(Duration.ofMillis(w.get("gap").asLong()));
            case "global":
                return GlobalWindows.create();
            default:
                throw new IllegalArgumentException("unknown window kind " + kind);
        }
    }

    // ---------------------------------------------------------------- window function

    static final ValueStateDescriptor<Integer> SEQ = new ValueStateDescriptor<>("seq", Types.INT);
    static final MapStateDescriptor<String, Integer> SEQ_MERGING =
            new MapStateDescriptor<>("seq-by-window", Types.STRING, Types.INT);

    /**
     * Records each firing. seq counts the firings of a (key, window): in context.windowState()
     * for non-merging windows; merging (session) windows may not use per-window state (Flink's
     * MergingWindowStateStore throws), so there it is a map in globalState() keyed by the exact
     * window [start, end): a session that grew by a merge is a new window and counts from 0.
     */
    static final class Fn
            extends ProcessWindowFunction<Tuple4<String, Long, Double, Integer>, Integer, String, Window> {
        final boolean merging;

        Fn(boolean merging) {
            this.merging = merging;
        }

        static String windowKey(Window w) {
            TimeWindow t = (TimeWindow) w;
            return t.getStart() + "," + t.getEnd();
        }

        @Override
        public void process(
                String key,
                Context ctx,
                Iterable<Tuple4<String, Long, Double, Integer>> elements,
                Collector<Integer> out)
                throws Exception {
            if (FIRINGS.size() >= MAX_FIRINGS) {
                // not Flink's: a trigger that never stops firing (e.g. a continuous trigger on a
                // global window at the final watermark) would otherwise run out of memory
                throw new IllegalStateException(
                        "oracle: more than " + MAX_FIRINGS + " firings, the trigger does not stop");
            }
            Window w = ctx.window();
            int seq;
            if (merging) {
                MapState<String, Integer> m = ctx.globalState().getMapState(SEQ_MERGING);
                Integer v = m.get(windowKey(w));
                seq = v == null ? 0 : v;
                m.put(windowKey(w), seq + 1);
            } else {
                ValueState<Integer> s = ctx.windowState().getState(SEQ);
                Integer v = s.value();
                seq = v == null ? 0 : v;
                s.update(seq + 1);
            }
            ArrayNode rec = NF.arrayNode();
            rec.add(key);
            if (w instanceof TimeWindow) {
                rec.add(((TimeWindow) w).getStart());
                rec.add(((TimeWindow) w).getEnd());
            } else {
                rec.addNull();
                rec.addNull();
            }
            rec.add(seq);
            rec.add(CAUSE == null ? "?" : CAUSE);
            rec.add(ctx.currentWatermark());
            ArrayNode rows = rec.addArray();
            for (Tuple4<String, Long, Double, Integer> e : elements) {
                rows.add(e.f3);
            }
            FIRINGS.add(rec);
            FIRE_TIMES.add(CAUSE_TIME);
            CAUSE = null;
            CAUSE_TIME = null;
            out.collect(seq);
        }

        @Override
        public void clear(Context ctx) throws Exception {
            if (merging) {
                ctx.globalState().getMapState(SEQ_MERGING).remove(windowKey(ctx.window()));
            } else {
                ctx.windowState().getState(SEQ).clear();
            }
        }
    }

    static final class NoteLate implements MapFunction<Tuple4<String, Long, Double, Integer>, Integer> {
        @Override
        public Integer map(Tuple4<String, Long, Double, Integer> t) {
            LATE.add(t.f3);
            return t.f3;
        }
    }

    // ---------------------------------------------------------------- running a case

    static Configuration jobConfig() {
        Configuration conf = new Configuration();
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "none");
        return conf;
    }

    /** Builds the job of one case; throws what Flink throws while building it. */
    static JobGraph build(JsonNode c) {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(1, jobConfig());
        env.setRuntimeMode(RuntimeExecutionMode.STREAMING);
        env.setParallelism(1);
        env.getConfig().setAutoWatermarkInterval(0);

        List<Tuple4<String, Long, Double, Integer>> rows = new ArrayList<>();
        int i = 0;
        for (JsonNode r : c.get("rows")) {
            rows.add(Tuple4.of(r.get(0).asText(), r.get(1).asLong(), r.get(2).asDouble(), i++));
        }
        final long bound = c.has("bound") ? c.get("bound").asLong() : 0;
        WatermarkStrategy<Tuple4<String, Long, Double, Integer>> wms =
                WatermarkStrategy.<Tuple4<String, Long, Double, Integer>>forGenerator(
                                ctx -> new PerEvent(bound))
                        .withTimestampAssigner((e, prev) -> e.f1);

        DataStream<Tuple4<String, Long, Double, Integer>> src =
                env.fromData(rows, TYPE).assignTimestampsAndWatermarks(wms);

        WindowAssigner assigner = buildAssigner(c.get("window"));
        WindowedStream ws = src.keyBy(new ByKey(), Types.STRING).window(assigner);
        JsonNode t = c.get("trigger");
        Trigger inner = (t == null || t.isNull()) ? assigner.getDefaultTrigger() : buildTrigger(t);
        ws = ws.trigger(new Recording(inner));
        JsonNode e = c.get("evictor");
        if (e != null && !e.isNull()) {
            ws = ws.evictor(buildEvictor(e));
        }
        long lateness = c.has("lateness") ? c.get("lateness").asLong() : 0;
        ws = ws.allowedLateness(Duration.ofMillis(lateness));
        OutputTag<Tuple4<String, Long, Double, Integer>> lateTag = new OutputTag<>("late", TYPE);
        ws = ws.sideOutputLateData(lateTag);

        SingleOutputStreamOperator<Integer> fired =
                ws.process(new Fn(assigner instanceof MergingWindowAssigner), Types.INT);
        fired.sinkTo(new DiscardingSink<>());
        fired.getSideOutput(lateTag).map(new NoteLate()).returns(Types.INT).sinkTo(new DiscardingSink<>());
        return env.getStreamGraph().getJobGraph();
    }

    static String describe(Throwable e) {
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        String msg = root.getMessage();
        if (msg != null) {
            int nl = msg.indexOf('\n');
            if (nl >= 0) {
                msg = msg.substring(0, nl);
            }
        }
        return root.getClass().getSimpleName() + ": " + msg;
    }

    static ObjectNode runCase(MiniCluster mc, JsonNode c, long timeoutSeconds) throws Exception {
        ObjectNode exp = NF.objectNode();
        FIRINGS.clear();
        LATE.clear();
        FIRE_TIMES.clear();
        CAUSE = null;
        CAUSE_TIME = null;
        JobGraph jg;
        try {
            jg = build(c);
        } catch (Exception ex) {
            exp.put("error", describe(ex));
            return exp;
        }
        mc.submitJob(jg).get();
        JobResult result;
        try {
            result = mc.requestJobResult(jg.getJobID()).get(timeoutSeconds, TimeUnit.SECONDS);
        } catch (TimeoutException te) {
            mc.cancelJob(jg.getJobID()).get();
            try {
                mc.requestJobResult(jg.getJobID()).get(30, TimeUnit.SECONDS);
            } catch (TimeoutException stuck) {
                System.err.println("oracle: case " + c.get("name") + " does not finish and cannot be cancelled");
                System.exit(3);
            }
            exp.put("error", "Timeout: the job did not finish in " + timeoutSeconds + " s");
            return exp;
        }
        if (result.getSerializedThrowable().isPresent()) {
            Throwable th = result.getSerializedThrowable().get()
                    .deserializeError(WindowOracle.class.getClassLoader());
            exp.put("error", describe(th));
            return exp;
        }
        ArrayNode firings = exp.putArray("firings");
        synchronized (FIRINGS) {
            for (JsonNode f : FIRINGS) {
                firings.add(f);
            }
        }
        ArrayNode late = exp.putArray("late");
        synchronized (LATE) {
            for (Integer r : LATE) {
                late.add(r);
            }
        }
        ArrayNode times = exp.putArray("fire_times");
        synchronized (FIRE_TIMES) {
            for (Long t : FIRE_TIMES) {
                if (t == null) {
                    times.addNull();
                } else {
                    times.add(t);
                }
            }
        }
        return exp;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: WindowOracle IN.json OUT.json");
            System.exit(2);
        }
        long timeout = Long.parseLong(System.getProperty("oracle.timeout", "60"));
        ObjectMapper om = new ObjectMapper();
        JsonNode root = om.readTree(new File(args[0]));

        Configuration conf = jobConfig();
        conf.set(RestOptions.BIND_PORT, "0");
        conf.set(RestOptions.ADDRESS, "127.0.0.1");
        conf.set(RestOptions.BIND_ADDRESS, "127.0.0.1");
        conf.set(TaskManagerOptions.MANAGED_MEMORY_SIZE, MemorySize.parse("16m"));
        MiniClusterConfiguration mcc =
                new MiniClusterConfiguration.Builder()
                        .setConfiguration(conf)
                        .setNumTaskManagers(1)
                        .setNumSlotsPerTaskManager(1)
                        .setCommonBindAddress("127.0.0.1")
                        .build();
        int n = 0, errors = 0;
        long t0 = System.nanoTime();
        try (MiniCluster mc = new MiniCluster(mcc)) {
            mc.start();
            for (JsonNode c : root.get("cases")) {
                ObjectNode exp = runCase(mc, c, timeout);
                ((ObjectNode) c).set("expected", exp);
                n++;
                if (exp.has("error")) {
                    errors++;
                }
                if (n % 25 == 0) {
                    System.err.printf("oracle: %d cases, %.0f s%n", n, (System.nanoTime() - t0) / 1e9);
                }
            }
        }
        om.writeValue(new File(args[1]), root);
        System.err.printf(
                "oracle: %d cases (%d refused or failed) in %.1f s%n",
                n, errors, (System.nanoTime() - t0) / 1e9);
        System.exit(0);
    }
}
