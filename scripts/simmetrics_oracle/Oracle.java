import org.simmetrics.StringMetric;
import org.simmetrics.StringDistance;
import org.simmetrics.metrics.StringMetrics;
import org.simmetrics.metrics.StringDistances;
import java.io.*;
import java.util.*;
public class Oracle {
  static StringMetric metric(String m) {
    switch (m) {
      case "euclidean": return StringMetrics.euclideanDistance();
      case "block-metric": case "block": return StringMetrics.blockDistance();
      case "identity": return StringMetrics.identity();
      case "dice": return StringMetrics.dice();
      case "longest-common-subsequence": return StringMetrics.longestCommonSubsequence();
      case "longest-common-substring": return StringMetrics.longestCommonSubstring();
      case "overlap-cofficient": return StringMetrics.overlapCoefficient();
      case "jaccard": return StringMetrics.jaccard();
      case "damerau-levenshtein": return StringMetrics.damerauLevenshtein();
      case "generalized-jaccard": return StringMetrics.generalizedJaccard();
      case "jaro": return StringMetrics.jaro();
      case "simon-white": return StringMetrics.simonWhite();
      case "levenshtein": return StringMetrics.levenshtein();
      default: return StringMetrics.cosineSimilarity();
    }
  }
  static StringDistance distance(String m) {
    switch (m) {
      case "euclidean": return StringDistances.euclideanDistance();
      case "block-distance": case "block": return StringDistances.blockDistance();
      case "identity": return StringDistances.identity();
      case "dice": return StringDistances.dice();
      case "longest-common-subsequence": return StringDistances.longestCommonSubsequence();
      case "longest-common-substring": return StringDistances.longestCommonSubstring();
      case "overlap-cofficient": return StringDistances.overlapCoefficient();
      case "jaccard": return StringDistances.jaccard();
      case "damerau-levenshtein": return StringDistances.damerauLevenshtein();
      case "generalized-jaccard": return StringDistances.generalizedJaccard();
      case "jaro": return StringDistances.jaro();
      case "simon-white": return StringDistances.simonWhite();
      case "levenshtein": return StringDistances.levenshtein();
      default: return StringDistances.cosineSimilarity();
    }
  }
  public static void main(String[] args) throws Exception {
    BufferedReader r = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
    String line;
    PrintStream out = new PrintStream(System.out, true, "UTF-8");
    while ((line = r.readLine()) != null) {
      String[] p = line.split("\u0001", -1);
      String kind = p[0], m = p[1], a = p[2], b = p[3];
      float v = kind.equals("metric") ? metric(m).compare(a, b) : distance(m).distance(a, b);
      out.println(Float.floatToIntBits(v) + " " + v);
    }
  }
}
