/*
 * JMeterLauncher -- starts Debian's JMeter 2.13 (package jmeter) so that it
 * can load test plans at all.
 *
 * Debian 12 ships JMeter 2.13 with the system's xstream (1.4.20), whose
 * security framework forbids every class that was not explicitly allowed.
 * JMeter 2.13 predates that framework and allows nothing, so every plan,
 * even an empty one, is refused with
 *   ForbiddenClassException: org.apache.jmeter.save.ScriptWrapper
 * This launcher loads JMeter's properties (SaveService reads them in its
 * static initialiser), adds xstream's AnyTypePermission to every static
 * XStream field of org.apache.jmeter.save.SaveService (the .jmx and the .jtl
 * readers/writers), and then hands over to JMeter's usual entry point,
 * org.apache.jmeter.NewDriver, with the arguments unchanged.
 *
 * AnyTypePermission is exactly what JMeter itself did before xstream had
 * permissions: only load plans you trust, as with any JMeter.
 *
 * Built and run by loadtest/jmeter/run.sh:
 *   javac -cp <ApacheJMeter.jar:ApacheJMeter_core.jar:jorphan.jar:xstream.jar> JMeterLauncher.java
 *   java -Djmeter.home=/usr/share/jmeter \
 *        -cp <dir>:/usr/share/jmeter/bin/ApacheJMeter.jar:/usr/share/jmeter/lib/*:/usr/share/jmeter/lib/ext/* \
 *        JMeterLauncher -n -t plan.jmx ...
 * JMeter's jars must be on the launcher's own class path: NewDriver's class
 * loader delegates to it first, so JMeter runs the very SaveService class
 * patched here.
 */

import java.io.File;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;

import com.thoughtworks.xstream.XStream;
import com.thoughtworks.xstream.security.AnyTypePermission;

import org.apache.jmeter.NewDriver;
import org.apache.jmeter.util.JMeterUtils;
import org.apache.jorphan.logging.LoggingManager;

public final class JMeterLauncher {
    private JMeterLauncher() {
    }

    public static void main(String[] args) throws Exception {
        String home = System.getProperty("jmeter.home");
        if (home == null || home.isEmpty()) {
            home = "/usr/share/jmeter";
            System.setProperty("jmeter.home", home);
        }
        File props = new File(home, "bin" + File.separator + "jmeter.properties");
        if (!props.isFile()) {
            System.err.println("JMeterLauncher: " + props + " not found (is jmeter.home right?)");
            System.exit(2);
        }
        // SaveService's static initialiser reads saveservice.properties
        // through these; JMeter loads them again, with -p/-q/-J, afterwards.
        JMeterUtils.setJMeterHome(home);
        JMeterUtils.loadJMeterProperties(props.getPath());
        // Logging is not set up yet, so SaveService's start-up INFO lines
        // would go to stdout; JMeter sets the levels again when it starts.
        LoggingManager.setPriority("WARN", "jmeter.save");

        Class<?> saveService = Class.forName("org.apache.jmeter.save.SaveService");
        int patched = 0;
        for (Field f : saveService.getDeclaredFields()) {
            if (!Modifier.isStatic(f.getModifiers()) || !XStream.class.isAssignableFrom(f.getType())) {
                continue;
            }
            f.setAccessible(true);
            XStream x = (XStream) f.get(null);
            if (x != null) {
                x.addPermission(AnyTypePermission.ANY);
                patched++;
            }
        }
        if (patched == 0) {
            System.err.println("JMeterLauncher: no XStream field in " + saveService.getName()
                    + "; this is not the JMeter 2.13 this launcher was written for");
            System.exit(2);
        }
        NewDriver.main(args);
    }
}
